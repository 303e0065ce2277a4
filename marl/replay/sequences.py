"""Sequence replay for recurrent VDN/QMIX agents: one replay row per chunk of joint steps.

A chunk is at most `max_seq_len` consecutive joint steps of one episode piece (the
group's agents at each env step, as `marl.replay.joint` joins them), zero-padded to
`max_seq_len`, with `seq_mask` (1 on real steps) and the agents' module states entering
its first step (`h0.<name>`, [n_agents, ...], what the runner stored for that step:
stored-state replay as in R2D2, no burn-in). Targets are n-step (`training.n_step`) within
the sequence (the loss bootstraps from a later step's output of the same sequence pass;
near the sequence's end the window shortens: `marl.algorithms.dqn.loss.sequence_targets`).
"""

from __future__ import annotations

import numpy as np

from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.data.chunks import SequencePlan, states_at
from marl.replay.joint import NEXT_STATE, STATE, join_group_steps

SEQ_MASK = "seq_mask"
STATE_START = "h0"  # prefix: `h0.<name>` holds the agents' states entering the chunk's first step


def state_start_column(name: str) -> str:
    return f"{STATE_START}.{name}"


def _chunks(plan, rows_of: dict, length: int) -> dict:
    s = len(plan)
    rows = plan.rows(np.arange(s))
    seq = np.repeat(np.arange(s), plan.lens)
    step = np.arange(len(rows)) - np.repeat(np.cumsum(plan.lens) - plan.lens, plan.lens)
    out = {}
    for name, values in rows_of.items():
        padded = np.zeros((s, length) + values.shape[1:], values.dtype)
        padded[seq, step] = values[rows]
        out[name] = padded
    return out


def agent_sequences(batch: SampleBatch, max_seq_len: int, state_names: list[str]) -> SampleBatch:
    """Chunks of each agent's trajectory pieces (DQN with a recurrent Q network)."""
    plan = SequencePlan(batch[sb.SEGMENT_END], max_seq_len)
    names = [sb.OBS, sb.ACTIONS, sb.NEXT_OBS, sb.REWARDS, sb.TERMINATEDS, sb.NEXT_ACTION_MASK, sb.ACTION_MASK]
    columns = {k: batch[k] for k in names if k in batch}
    columns[SEQ_MASK] = np.ones(len(batch), np.float32)
    out = _chunks(plan, columns, max_seq_len)
    for name in state_names:
        out[state_start_column(name)] = states_at(batch, name, plan.starts)
    return SampleBatch(out)


def joint_sequences(batch: SampleBatch, agent_indices: list[int], max_seq_len: int, state_names: list[str]) -> SampleBatch:
    steps = join_group_steps(batch, agent_indices)
    n = len(agent_indices)
    order = np.lexsort((batch[sb.AGENT_INDEX], batch[sb.T], batch[sb.EPS_ID]))  # join_group_steps' order
    plan = SequencePlan(steps[sb.SEGMENT_END], max_seq_len)
    # Every agent acts at every step of the group's pieces, so a joint chunk starts where each agent's own does.
    start_rows = order.reshape(len(steps), n)[plan.starts]
    states = {name: states_at(batch, name, start_rows.reshape(-1)) for name in state_names}
    s, length = len(plan), max_seq_len
    rows = plan.rows(np.arange(s))
    seq = np.repeat(np.arange(s), plan.lens)
    step = np.arange(len(rows)) - np.repeat(np.cumsum(plan.lens) - plan.lens, plan.lens)

    def padded(values: np.ndarray) -> np.ndarray:
        out = np.zeros((s, length) + values.shape[1:], values.dtype)
        out[seq, step] = values[rows]
        return out

    out = {
        sb.OBS: padded(steps[sb.OBS]),
        sb.ACTIONS: padded(steps[sb.ACTIONS]),
        sb.NEXT_OBS: padded(steps[sb.NEXT_OBS]),
        sb.REWARDS: padded(steps[sb.REWARDS].astype(np.float32)),
        sb.TERMINATEDS: padded(steps[sb.TERMINATEDS]),
        SEQ_MASK: padded(np.ones(len(steps), np.float32)),
    }
    out[STATE] = out[sb.OBS].reshape(s, length, -1)
    out[NEXT_STATE] = out[sb.NEXT_OBS].reshape(s, length, -1)
    for name, value in states.items():
        out[state_start_column(name)] = value.reshape((s, n) + value.shape[1:])
    return SampleBatch(out)
