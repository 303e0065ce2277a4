"""Learner connectors: what turns sampled rows into training targets.

Pieces (see `marl.connectors.piece`): `RewardScale`, `RewardClip` (configured in
`connectors.learner`, run first), `GAE` and `StandardizeAdvantages` (PPO's own, from its
`learner_connectors(cfg)`). `LearnerPipeline` runs one policy's pieces on its batch.

Rows of a policy batch are grouped by trajectory piece: each agent's rows of
one episode are contiguous and ordered by env step, and the last row of every
piece carries `segment_end`. A piece that ends without termination (episode
truncated, or the rollout fragment cut) carries `bootstrap_value` = V(s').
"""

from __future__ import annotations

import numpy as np

from marl.connectors.piece import ConnectorPiece, LearnerContext
from marl.data import sample_batch as sb


def reverse_scan(deltas: np.ndarray, carry: np.ndarray) -> np.ndarray:
    """out[i] = deltas[i] + carry[i] * out[i+1], right to left (carry 0 cuts the chain).

    Computed in float64 and stored as float32. Many short chains (a batched runner's fragment: one
    per world and agent) are scanned together, one vectorised step per position from the chains'
    ends; few long ones in a Python loop. Both give the same numbers (the same float64 operations).
    """
    n = len(deltas)
    if n >= 8192:  # (below that the loop is as fast)
        d, c = np.asarray(deltas, np.float64), np.asarray(carry, np.float64)
        ends = np.flatnonzero(c == 0.0)  # each chain ends where the carry cuts it (and at the last row)
        if ends[-1:].tolist() != [n - 1]:
            ends = np.append(ends, n - 1)
        starts = np.concatenate(([0], ends[:-1] + 1))
        longest = int((ends - starts).max()) + 1
        if longest * 64 <= n:
            return _scan_chains(d, c, starts, ends, longest)
    out = np.empty(n, dtype=np.float32)
    running = 0.0
    dl, cl = deltas.tolist(), carry.tolist()  # Python floats: ~10x faster than indexing NumPy scalars
    for i in range(n - 1, -1, -1):
        running = dl[i] + cl[i] * running
        out[i] = running
    return out


def _scan_chains(d: np.ndarray, c: np.ndarray, starts: np.ndarray, ends: np.ndarray, longest: int) -> np.ndarray:
    """`reverse_scan` of many chains at once (float64 in, float32 out): one vectorised step per position."""
    out = d.copy()
    for k in range(1, longest):  # out[end - k] = d + carry * out[end - k + 1], for the chains that long
        i = ends[ends - starts >= k] - k
        out[i] = d[i] + c[i] * out[i + 1]
    return out.astype(np.float32)


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


# -- pieces ------------------------------------------------------------------------------
class GAE(ConnectorPiece):
    """`advantages` and `value_targets` by GAE(lambda) (`compute_gae`)."""

    def __init__(self, gamma: float = 0.99, lambda_: float = 0.95):
        self.gamma, self.lambda_ = gamma, lambda_

    def __call__(self, batch, ctx=None):
        return compute_gae(batch, self.gamma, self.lambda_)


class StandardizeAdvantages(ConnectorPiece):
    """`advantages` standardised over the policy's train batch."""

    def __call__(self, batch, ctx=None):
        batch[sb.ADVANTAGES] = standardize(batch[sb.ADVANTAGES])
        return batch


def gae_pieces(gamma: float, lambda_: float, standardize_advantages: bool) -> list[ConnectorPiece]:
    """The learner pieces of an actor-critic on GAE advantages (PPO, A2C): GAE, then optional standardisation."""
    return [GAE(gamma, lambda_)] + ([StandardizeAdvantages()] if standardize_advantages else [])


def _number(key: str, value, positive: bool = False) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or (positive and value <= 0):
        raise ValueError(f"{key} must be a number{' > 0' if positive else ''}, got {value!r}")
    return float(value)


class RewardScale(ConnectorPiece):
    """rewards * scale, before the algorithm computes its targets (the episode returns reported stay raw)."""

    def __init__(self, scale: float = 1.0):
        self.scale = _number("scale", scale)

    def __call__(self, batch, ctx=None):
        batch[sb.REWARDS] = (batch[sb.REWARDS] * np.float32(self.scale)).astype(np.float32)
        return batch


class RewardClip(ConnectorPiece):
    """rewards clipped to [-limit, limit], before the algorithm computes its targets."""

    def __init__(self, limit: float = 1.0):
        self.limit = _number("limit", limit, positive=True)

    def __call__(self, batch, ctx=None):
        batch[sb.REWARDS] = np.clip(batch[sb.REWARDS], -self.limit, self.limit).astype(np.float32)
        return batch


class LearnerPipeline:
    """One policy's learner pieces: the configured ones, then the algorithm's (plain `batch -> batch`
    callables are accepted there, as stateless pieces)."""

    def __init__(self, policy_id: str, pieces: dict[str, ConnectorPiece]):
        self.ctx = LearnerContext(policy_id)
        self.pieces = dict(pieces)

    def __call__(self, batch, algorithm_pieces=()):
        for piece in self.pieces.values():
            batch = piece(batch, self.ctx)
        for piece in algorithm_pieces:
            batch = piece(batch, self.ctx) if isinstance(piece, ConnectorPiece) else piece(batch)
        return batch

    def get_state(self) -> dict:
        return {key: p.get_state() for key, p in self.pieces.items()}

    def set_state(self, state: dict) -> None:
        for key, piece_state in state.items():
            if key in self.pieces:
                self.pieces[key].set_state(piece_state)
