"""Learner connectors: what turns sampled rows into training targets.

Rows of a policy batch are grouped by trajectory piece: each agent's rows of
one episode are contiguous and ordered by env step, and the last row of every
piece carries `segment_end`. A piece that ends without termination (episode
truncated, or the rollout fragment cut) carries `bootstrap_value` = V(s').
"""

from __future__ import annotations

import numpy as np

from marl.data import sample_batch as sb


def reverse_scan(deltas: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """out[i] = deltas[i] + carry[i] * out[i+1], right to left (carry 0 cuts the chain)."""
    out = np.empty(len(deltas), dtype=np.float32)
    running = 0.0
    d, c = deltas.tolist(), carry.tolist()  # Python floats: ~10x faster than indexing NumPy scalars
    for i in range(len(d) - 1, -1, -1):
        running = d[i] + c[i] * running
        out[i] = running
    return out


def vtrace(
    behaviour_logp: np.ndarray,
    target_logp: np.ndarray,
    rewards: np.ndarray,
    values: np.ndarray,
    bootstrap_value: np.ndarray,
    terminated: np.ndarray,
    segment_end: np.ndarray,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
    lambda_: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace targets vs and policy-gradient advantages (Espeholt et al. 2018), over trajectory pieces.

        rho_t = min(rho_bar, pi/mu),  c_t = lambda * min(c_bar, pi/mu)
        vs_t - V(x_t) = rho_t * delta_t + gamma * c_t * (vs_{t+1} - V(x_{t+1})),
        delta_t = r_t + gamma * V(x_{t+1}) - V(x_t)
        A_t = min(pg_rho_bar, pi/mu) * (r_t + gamma * vs_{t+1} - V(x_t))

    At a piece end V(x_{t+1}) = vs_{t+1} = `bootstrap_value` (0 after a termination).
    """
    ratio = np.exp(target_logp - behaviour_logp)
    rho = np.minimum(rho_bar, ratio)
    c = lambda_ * np.minimum(c_bar, ratio)
    nonterminal = 1.0 - terminated.astype(np.float32)
    end = segment_end.astype(bool)
    next_v = np.where(end, bootstrap_value, np.roll(values, -1)) * nonterminal
    deltas = rho * (rewards + gamma * next_v - values)
    carry = gamma * c * nonterminal * (1.0 - end)
    vs_minus_v = reverse_scan(deltas.astype(np.float32), carry.astype(np.float32))
    vs = values + vs_minus_v
    next_vs = np.where(end, bootstrap_value, np.roll(vs, -1)) * nonterminal
    pg_adv = np.minimum(pg_rho_bar, ratio) * (rewards + gamma * next_vs - values)
    return vs.astype(np.float32), pg_adv.astype(np.float32)


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
    adv = reverse_scan(deltas, carry)
    batch[sb.ADVANTAGES] = adv
    batch[sb.VALUE_TARGETS] = adv + v
    return batch


def standardize(x: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    return ((x - x.mean()) / (x.std() + eps)).astype(np.float32)
