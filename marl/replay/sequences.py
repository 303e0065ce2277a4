"""Sequence replay for recurrent VDN/QMIX agents: one replay row per chunk of joint steps.

A chunk is at most `max_seq_len` consecutive joint steps of one episode piece (the
group's agents at each env step, as `marl.replay.joint` joins them), zero-padded to
`max_seq_len`, with `seq_mask` (1 on real steps) and the agents' module states entering
its first step (`h0.<name>`, [n_agents, ...], what the runner stored for that step:
stored-state replay as in R2D2). With `training.burn_in` = B a row starts up to B steps
earlier in the same piece, from the state stored there, and those burn-in steps have
`seq_mask` 0: they only warm up the state (no TD loss on them; with `training.burn_in_grad`
false, R2D2's, the learner detaches the state they warm up: `DETACH_AT`), so rows are up to B + `max_seq_len` steps. Targets are n-step (`training.n_step`) within
the sequence (the loss bootstraps from a later step's output of the same sequence pass;
near the sequence's end the window shortens: `marl.algorithms.dqn.loss.sequence_targets`).
"""

from __future__ import annotations

import numpy as np

from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.data.chunks import SequencePlan, states_at
from marl.replay.joint import ALIVE, NEXT_ALIVE, NEXT_STATE, STATE, JointLayout, join_group_steps

SEQ_MASK = "seq_mask"
# [B] int64: the first step of each row with a TD loss, where the learner detaches the state when the policy's
# burn-in runs without gradients (`PolicyPlan.burn_in_grad` false, R2D2's); absent: gradients flow through it.
DETACH_AT = "detach_at"
STATE_START = "h0"  # prefix: `h0.<name>` holds the agents' states entering the chunk's first step


def state_start_column(name: str) -> str:
    return f"{STATE_START}.{name}"


def _layout(plan: SequencePlan, burn_in: int):
    """(first row of each replay row, rows per replay row, burn-in rows of each, row length)."""
    first = plan.burn_in_starts(burn_in)
    burn = plan.starts - first
    return first, burn + plan.lens, burn, burn_in + plan.max_seq_len


def _padded(first, lens, length: int):
    """A function padding per-row values into [rows, length, ...] (the rows of each replay row end to end)."""
    s = len(first)
    seq = np.repeat(np.arange(s), lens)
    step = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    rows = np.repeat(first, lens) + step

    def padded(values: np.ndarray) -> np.ndarray:
        out = np.zeros((s, length) + values.shape[1:], values.dtype)
        out[seq, step] = values[rows]
        return out

    return padded


def _loss_mask(lens, burn, length: int) -> np.ndarray:
    """1 on the steps that carry a TD loss: real steps after the burn-in."""
    steps = np.arange(length)
    return ((steps >= burn[:, None]) & (steps < lens[:, None])).astype(np.float32)


def first_loss_steps(mask):
    """[B] the first step of each row that carries a TD loss (its burn-in steps come before it)."""
    return mask.argmax(1)


def agent_sequences(batch: SampleBatch, max_seq_len: int, state_names: list[str], burn_in: int = 0) -> SampleBatch:
    """Chunks of each agent's trajectory pieces (DQN with a recurrent Q network)."""
    plan = SequencePlan(batch[sb.SEGMENT_END], max_seq_len)
    first, lens, burn, length = _layout(plan, burn_in)
    padded = _padded(first, lens, length)
    names = [sb.OBS, sb.ACTIONS, sb.NEXT_OBS, sb.REWARDS, sb.TERMINATEDS, sb.NEXT_ACTION_MASK, sb.ACTION_MASK]
    out = {k: padded(batch[k]) for k in names if k in batch}
    out[SEQ_MASK] = _loss_mask(lens, burn, length)
    for name in state_names:
        out[state_start_column(name)] = states_at(batch, name, first)
    return SampleBatch(out)


def joint_sequences(batch: SampleBatch, agent_indices: list[int], max_seq_len: int, state_names: list[str],
                    burn_in: int = 0) -> SampleBatch:
    layout = JointLayout(batch, agent_indices)
    steps = join_group_steps(batch, agent_indices, layout)
    n = len(agent_indices)
    plan = SequencePlan(steps[sb.SEGMENT_END], max_seq_len)
    first, lens, burn, length = _layout(plan, burn_in)
    padded = _padded(first, lens, length)
    s = len(plan)
    out = {
        sb.OBS: padded(steps[sb.OBS]),
        sb.ACTIONS: padded(steps[sb.ACTIONS]),
        sb.NEXT_OBS: padded(steps[sb.NEXT_OBS]),
        sb.REWARDS: padded(steps[sb.REWARDS].astype(np.float32)),
        sb.TERMINATEDS: padded(steps[sb.TERMINATEDS]),
        SEQ_MASK: _loss_mask(lens, burn, length),
        ALIVE: padded(steps[ALIVE]),
        NEXT_ALIVE: padded(steps[NEXT_ALIVE]),
    }
    out[STATE] = out[sb.OBS].reshape(s, length, -1)
    out[NEXT_STATE] = out[sb.NEXT_OBS].reshape(s, length, -1)
    # Every agent acts from the start of the group's pieces, so a joint chunk (or burn-in) starts where each
    # agent's own does: the runner stored their states there. A dead agent's place starts from zeros: its steps
    # count for nothing (`alive`), as do those of one that dies before the chunk's first TD step.
    start_rows = layout.row[first].reshape(-1)
    stored = layout.alive[first + burn].reshape(-1)
    for name in state_names:
        value = states_at(batch, name, start_rows[stored])
        full = np.zeros((len(start_rows),) + value.shape[1:], value.dtype)
        full[stored] = value
        out[state_start_column(name)] = full.reshape((s, n) + value.shape[1:])
    return SampleBatch(out)
