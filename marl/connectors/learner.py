"""Learner connectors: what turns sampled rows into training targets.

Pieces (see `marl.connectors.piece`): `RewardScale`, `RewardClip` (configured in
`connectors.learner`, run first), `GAE` and `StandardizeAdvantages` (PPO's own, from its
`learner_connectors(cfg)`). `LearnerPipeline` runs one policy's pieces on its batch.

Rows of a policy batch are grouped by trajectory piece: each agent's rows of
one episode are contiguous and ordered by env step, and the last row of every
piece carries `segment_end`. A piece that ends without termination (episode
truncated, or the rollout fragment cut) carries `bootstrap_value` = V(s').

Columns are NumPy arrays (the dict path) or torch tensors (a batched runner's fragment): every function
here computes in the column's own library, on its device (`marl.data.array_ops`), with the same
operations in the same order, so both give the same numbers (the scans to the last bit).
"""

from __future__ import annotations

import numpy as np
import torch

from marl.connectors.piece import ConnectorPiece, LearnerContext
from marl.data import array_ops as ops
from marl.data import sample_batch as sb
from marl.data.array_ops import Column


def reverse_scan(deltas: Column, carry: Column) -> Column:
    """out[i] = deltas[i] + carry[i] * out[i+1], right to left (carry 0 cuts the chain).

    Computed in float64 and stored as float32. Many short chains (a batched runner's fragment: one
    per world and agent) are scanned together, one vectorised step per position from the chains'
    ends (`_scan_chains`: always for a tensor, on its device); few long ones of a NumPy column in a
    Python loop. Both give the same numbers (the same float64 operations in the same order).
    """
    if ops.is_tensor(deltas):
        return _scan_chains(deltas.to(torch.float64), carry.to(torch.float64))
    n = len(deltas)
    if n >= 8192:  # (below that the loop is as fast)
        c = np.asarray(carry, np.float64)
        ends = np.flatnonzero(c == 0.0)  # each chain ends where the carry cuts it (and at the last row)
        if ends[-1:].tolist() != [n - 1]:
            ends = np.append(ends, n - 1)
        longest = int(np.diff(ends, prepend=-1).max())
        if longest * 64 <= n:  # the tensor scan over NumPy's memory (no copies)
            return _scan_chains(torch.from_numpy(np.asarray(deltas, np.float64)), torch.from_numpy(c)).numpy()
    out = np.empty(n, dtype=np.float32)
    running = 0.0
    dl, cl = deltas.tolist(), carry.tolist()  # Python floats: ~10x faster than indexing NumPy scalars
    for i in range(n - 1, -1, -1):
        running = dl[i] + cl[i] * running
        out[i] = running
    return out


def _scan_chains(d: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """`reverse_scan` of float64 tensors into float32: step k sets the k-th row from every chain's end at once,
    out[end - k] = d + carry * out[end - k + 1], for the chains longer than k. The chains are ordered longest
    first, so the ones a step touches are a prefix of them; their lengths are read on the host once."""
    n = len(d)
    if n == 0:
        return d.to(torch.float32)
    cut = c == 0.0
    cut[-1] = True  # the last row ends a chain whatever its carry
    ends = cut.nonzero().squeeze(1)
    lengths = torch.diff(ends, prepend=ends.new_full((1,), -1))
    lengths, longest_first = torch.sort(lengths, descending=True, stable=True)
    ends = ends[longest_first]
    # counts[L]: the chains at least L rows long; step k (1 .. longest - 1) touches the counts[k + 1] longest
    counts = (torch.bincount(lengths).flip(0).cumsum(0).flip(0)).tolist()
    out = d.clone()
    for k in range(1, len(counts) - 1):
        i = ends[: counts[k + 1]] - k
        out[i] = d[i] + c[i] * out[i + 1]
    return out.to(torch.float32)


def vtrace(
    behaviour_logp: Column,
    target_logp: Column,
    rewards: Column,
    values: Column,
    bootstrap_value: Column,
    terminated: Column,
    segment_end: Column,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
    lambda_: float = 1.0,
) -> tuple[Column, Column]:
    """V-trace targets vs and policy-gradient advantages (Espeholt et al. 2018), over trajectory pieces.

        rho_t = min(rho_bar, pi/mu),  c_t = lambda * min(c_bar, pi/mu)
        vs_t - V(x_t) = rho_t * delta_t + gamma * c_t * (vs_{t+1} - V(x_{t+1})),
        delta_t = r_t + gamma * V(x_{t+1}) - V(x_t)
        A_t = min(pg_rho_bar, pi/mu) * (r_t + gamma * vs_{t+1} - V(x_t))

    At a piece end V(x_{t+1}) = vs_{t+1} = `bootstrap_value` (0 after a termination).
    """
    ratio = ops.exp(target_logp - behaviour_logp)
    rho = ops.minimum(rho_bar, ratio)
    c = lambda_ * ops.minimum(c_bar, ratio)
    nonterminal = 1.0 - ops.float32(terminated)
    end = segment_end
    next_v = ops.where(end, bootstrap_value, ops.next_row(values)) * nonterminal
    deltas = rho * (rewards + gamma * next_v - values)
    carry = gamma * c * nonterminal * (1.0 - ops.float32(end))
    vs_minus_v = reverse_scan(ops.float32(deltas), ops.float32(carry))
    vs = values + vs_minus_v
    next_vs = ops.where(end, bootstrap_value, ops.next_row(vs)) * nonterminal
    pg_adv = ops.minimum(pg_rho_bar, ratio) * (rewards + gamma * next_vs - values)
    return ops.float32(vs), ops.float32(pg_adv)


def compute_gae(batch: sb.SampleBatch, gamma: float, lambda_: float) -> sb.SampleBatch:
    """Adds `advantages` and `value_targets` (GAE(lambda)), bootstrapping truncated pieces."""
    v = ops.float32(batch[sb.VF_PREDS])
    rewards = ops.float32(batch[sb.REWARDS])
    terminated = ops.float32(batch[sb.TERMINATEDS])
    end = batch[sb.SEGMENT_END]
    next_v = ops.float32(ops.where(end, batch[sb.BOOTSTRAP_VALUE], ops.next_row(v)))
    nonterminal = 1.0 - terminated
    deltas = rewards + gamma * nonterminal * next_v - v
    # carry[i]: how much of advantage[i+1] flows into advantage[i]; zero across piece boundaries.
    carry = (gamma * lambda_) * nonterminal * (1.0 - ops.float32(end))
    adv = reverse_scan(deltas, carry)
    batch[sb.ADVANTAGES] = adv
    batch[sb.VALUE_TARGETS] = adv + v
    return batch


def standardize(x: Column, eps: float = 1e-8) -> Column:
    return ops.float32((x - x.mean()) / (ops.std(x) + eps))


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
        batch[sb.REWARDS] = ops.float32(batch[sb.REWARDS] * np.float32(self.scale))
        return batch


class RewardClip(ConnectorPiece):
    """rewards clipped to [-limit, limit], before the algorithm computes its targets."""

    def __init__(self, limit: float = 1.0):
        self.limit = _number("limit", limit, positive=True)

    def __call__(self, batch, ctx=None):
        batch[sb.REWARDS] = ops.float32(ops.clip(batch[sb.REWARDS], -self.limit, self.limit))
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
