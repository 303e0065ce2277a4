"""n-step transitions from a policy's trajectory pieces.

A runner's batch holds each agent's rows of one episode contiguously, in step
order, with `segment_end` on the last row of each piece and `next_obs` filled
(the next row's obs inside a piece; the final or next-acting obs at its end).
Row t becomes the transition

    (obs_t, a_t, sum_{k<m} gamma^k r_{t+k}, next_obs_{t+m-1}, terminated, gamma^m)

where m <= n stops early at a termination or at the end of the piece, so a
truncated or cut piece bootstraps from the state it actually reached.
"""

from __future__ import annotations

import numpy as np

from marl.data import SampleBatch
from marl.data import sample_batch as sb

DISCOUNTS = "discounts"  # gamma^m of each transition: how far its bootstrap lies


def nstep_transitions(batch: SampleBatch, n: int, gamma: float, keep: tuple[str, ...] = (),
                      keep_next: tuple[str, ...] = ()) -> SampleBatch:
    """`keep`: more columns taken at row t as they are; `keep_next`: more taken at the bootstrap row (as next_obs)."""
    if n < 1:
        raise ValueError(f"n_step must be >= 1, got {n}")
    size = len(batch)
    rewards = batch[sb.REWARDS].astype(np.float32)
    terminated = batch[sb.TERMINATEDS].astype(bool)
    end = batch[sb.SEGMENT_END].astype(bool)
    # Rows left in the piece after row t (0 at its last row).
    piece_id = np.concatenate([[0], np.cumsum(end[:-1])]) if size else np.zeros(0, dtype=np.int64)
    last_of_piece = np.flatnonzero(end)
    remaining = last_of_piece[piece_id] - np.arange(size)

    ret = np.zeros(size, dtype=np.float32)
    last = np.arange(size)  # row whose next_obs is the bootstrap state
    alive = np.ones(size, dtype=bool)  # still accumulating (no termination, piece not over)
    steps = np.zeros(size, dtype=np.int64)
    for k in range(n):
        take = alive & (remaining >= k)
        rows = np.minimum(np.arange(size) + k, size - 1)
        ret[take] += (gamma**k) * rewards[rows[take]]
        last[take] = rows[take]
        steps[take] = k + 1
        alive = take & ~terminated[rows]
    out = {
        sb.OBS: batch[sb.OBS],
        sb.ACTIONS: batch[sb.ACTIONS],
        sb.REWARDS: ret,
        sb.NEXT_OBS: batch[sb.NEXT_OBS][last],
        sb.TERMINATEDS: terminated[last],
        DISCOUNTS: (gamma**steps).astype(np.float32),
    }
    if sb.NEXT_ACTION_MASK in batch:  # legal actions at the bootstrap state
        out[sb.NEXT_ACTION_MASK] = batch[sb.NEXT_ACTION_MASK][last]
    if sb.NEXT_STATE in batch:  # the global state at the bootstrap step
        out[sb.NEXT_STATE] = batch[sb.NEXT_STATE][last]
    for name in keep:
        if name in batch:
            out[name] = batch[name]
    for name in keep_next:
        if name in batch:
            out[name] = batch[name][last]
    return SampleBatch(out)
