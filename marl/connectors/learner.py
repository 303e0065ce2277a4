"""Learner connectors: what turns sampled rows into training targets.

Rows of a policy batch are grouped by trajectory piece: each agent's rows of
one episode are contiguous and ordered by env step, and the last row of every
piece carries `segment_end`. A piece that ends without termination (episode
truncated, or the rollout fragment cut) carries `bootstrap_value` = V(s').
"""

from __future__ import annotations

import numpy as np

from marl.data import sample_batch as sb


def compute_gae(batch: sb.SampleBatch, gamma: float, lambda_: float) -> sb.SampleBatch:
    """Adds `advantages` and `value_targets` (GAE(lambda)), bootstrapping truncated pieces."""
    v = batch[sb.VF_PREDS].astype(np.float32)
    rewards = batch[sb.REWARDS].astype(np.float32)
    terminated = batch[sb.TERMINATEDS].astype(np.float32)
    end = batch[sb.SEGMENT_END]
    next_v = np.where(end, batch[sb.BOOTSTRAP_VALUE], np.roll(v, -1)).astype(np.float32)
    nonterminal = 1.0 - terminated
    deltas = rewards + gamma * nonterminal * next_v - v
    # carry[i]: how much of advantage[i+1] flows into advantage[i]; zero across piece boundaries.
    carry = (gamma * lambda_) * nonterminal * (1.0 - end.astype(np.float32))
    adv = np.empty_like(deltas)
    running = 0.0
    d, c = deltas.tolist(), carry.tolist()  # Python floats: ~10x faster than indexing NumPy scalars
    for i in range(len(d) - 1, -1, -1):
        running = d[i] + c[i] * running
        adv[i] = running
    batch[sb.ADVANTAGES] = adv
    batch[sb.VALUE_TARGETS] = adv + v
    return batch


def standardize(x: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    return ((x - x.mean()) / (x.std() + eps)).astype(np.float32)
