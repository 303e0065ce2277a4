"""Training stateful (recurrent) modules on sequences: chunking, sequence minibatches, the acting check.

A policy batch holds each agent's trajectory pieces as contiguous rows in step
order, the last row of each piece flagged `segment_end` (`marl.runners.collector`).
`SequencePlan` (`marl.data.chunks`) cuts every piece into chunks of at most
`max_seq_len` rows; each chunk starts from the module state the runner stored for
its first row (the `state_in.<name>` tables hold one row per chunk), so the
training pass sees the same input history as acting did. Minibatches take whole chunks (shuffled as units, about `minibatch_size`
rows each), and the module receives them laid end to end with `seq_lens` and the
chunks' starting `state_in` (`marl.modules.recurrent` pads them inside the module
and drops the padding before any loss). Targets (GAE, V-trace) are computed on
the batch before chunking, per trajectory piece, as for memoryless modules.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.data import sample_batch as sb
from marl.data.chunks import SequencePlan, states_at
from marl.errors import ConfigError

__all__ = ["SequencePlan", "add_sequences", "sequence_minibatches", "shard_sequences", "check_acting_matches_training"]

SEQ_LENS = "seq_lens"  # [S] int64: the lengths of the minibatch's sequences, laid end to end
STATE_IN = "state_in"  # {name: [S, ...]}: the module state entering each sequence
# Mean |log pi_train - log pi_act| over the first batch above which acting and training disagree.
CONSISTENCY_TOLERANCE = 1e-3


def shard_bounds(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Rows [lo, hi) of an n-row minibatch that `rank` computes: contiguous, sizes differ by at most one."""
    base, extra = divmod(n, world_size)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


def state_names(module) -> list[str]:
    return list(module.get_initial_state())


def add_sequences(tensors: dict, batch: sb.SampleBatch, plan: SequencePlan, names: list[str]) -> dict:
    """The whole batch as sequences (for `prepare` passes and single-step updates): the rows stay in order."""
    missing = [sb.state_in_column(n) for n in names if sb.state_in_column(n) not in batch]
    if missing:
        raise ConfigError(f"the batch of a stateful module lacks {missing}: runners record them for stateful modules")
    out = dict(tensors)
    out[SEQ_LENS] = torch.from_numpy(plan.lens)
    out[STATE_IN] = {n: torch.from_numpy(np.ascontiguousarray(states_at(batch, n, plan.starts))) for n in names}
    return out


def sequence_minibatches(tensors: dict, plan: SequencePlan, minibatch_size: int | None, num_epochs: int, rng):
    """(row indices, minibatch) of each SGD step: whole chunks, shuffled as units once per epoch.

    `tensors` comes from `add_sequences` (its `state_in` holds one entry per chunk)."""
    flat = {k: v for k, v in tensors.items() if k not in (SEQ_LENS, STATE_IN)}
    per_step = len(plan) if not minibatch_size else max(1, round(minibatch_size / plan.max_seq_len))
    lens, state_in = tensors[SEQ_LENS], tensors[STATE_IN]
    for _ in range(num_epochs):
        order = np.arange(len(plan)) if per_step >= len(plan) and num_epochs == 1 else rng.permutation(len(plan))
        for start in range(0, len(plan), per_step):
            chosen = order[start : start + per_step]
            rows = plan.rows(chosen)
            idx = torch.from_numpy(rows)
            pick = torch.from_numpy(chosen)
            minibatch = {k: v[idx] for k, v in flat.items()}
            minibatch[SEQ_LENS] = lens[pick]
            minibatch[STATE_IN] = {n: s[pick] for n, s in state_in.items()}
            yield rows, minibatch


def shard_sequences(minibatch: dict, rank: int, world_size: int) -> tuple[dict, int, int]:
    """(this rank's whole sequences of a sequence minibatch, its rows, the minibatch's rows)."""

    lens = minibatch[SEQ_LENS]
    n = int(lens.sum())
    lo, hi = shard_bounds(len(lens), rank, world_size)
    if hi == lo:  # fewer sequences than ranks: one sequence with weight 0
        lo, hi = 0, 1
        share_rows = 0
    else:
        share_rows = int(lens[lo:hi].sum())
    row_lo = int(lens[:lo].sum())
    row_hi = row_lo + int(lens[lo:hi].sum())
    shard = {k: v[row_lo:row_hi] for k, v in minibatch.items() if k not in (SEQ_LENS, STATE_IN)}
    shard[SEQ_LENS] = lens[lo:hi]
    shard[STATE_IN] = {k: v[lo:hi] for k, v in minibatch[STATE_IN].items()}
    return shard, share_rows, n


def check_acting_matches_training(policy_id: str, module, tensors: dict) -> float:
    """Raises when the training pass of a stateful module does not reproduce its acting pass.

    Run on the first update, before any gradient step, with the weights the batch was
    sampled with: the log-probs of the taken actions under `forward_train` over the
    sequences must match the `action_logp` the runner recorded. They differ when the
    module's training pass ignores `seq_lens`/`state_in` (so it sees another input
    history than acting did), and it would then train silently wrong.
    """
    if sb.ACTION_LOGP not in tensors:
        return 0.0
    with torch.no_grad():
        out = module.forward_train(tensors)
        logp = module.action_dist(out["action_dist_inputs"]).logp(tensors[sb.ACTIONS])
    gap = float((logp - tensors[sb.ACTION_LOGP]).abs().mean())
    if not np.isfinite(gap) or gap > CONSISTENCY_TOLERANCE:
        raise ConfigError(
            f"policy '{policy_id}': the stateful module {type(module).__name__} does not reproduce its acting pass "
            f"in training (mean |log-prob difference| {gap:.2e} > {CONSISTENCY_TOLERANCE:g} on the first batch): its "
            "forward_train must run its rows as sequences laid end to end, starting each from batch['state_in'] with "
            "lengths batch['seq_lens'] (see marl.modules.recurrent); set debugging.check_module_state=false to skip"
        )
    return gap
