"""Replay buffers: a ring of preallocated NumPy columns, uniform or prioritised.

Capacity counts transitions (rows). Columns are allocated on the first `add`
from the incoming batch's dtypes and shapes, so one class serves any policy.
`np.zeros` memory is only committed when written, so a 1M-row buffer costs
what it holds.
"""

from __future__ import annotations

import numpy as np

from marl.data import SampleBatch
from marl.replay.segment_tree import MinSegmentTree, SumSegmentTree, set_leaves

REPLAY_WEIGHTS = "weights"  # importance-sampling weight of each sampled row (1 for uniform replay)


class ReplayBuffer:
    """Uniform replay over the last `capacity` transitions."""

    def __init__(self, capacity: int, seed: int | None = None):
        if int(capacity) < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.columns: dict[str, np.ndarray] | None = None
        self.size = 0  # rows currently held
        self.next_idx = 0  # where the next row goes
        self.added = 0  # rows ever added
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def _allocate(self, batch: SampleBatch) -> None:
        self.columns = {k: np.zeros((self.capacity,) + v.shape[1:], v.dtype) for k, v in batch.items()}

    def add(self, batch: SampleBatch) -> np.ndarray:
        """Appends the batch's rows (overwriting the oldest when full); returns their slot indices."""
        n = len(batch)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if self.columns is None:
            self._allocate(batch)
        elif set(batch.keys()) != set(self.columns):
            raise ValueError(
                f"replay batch columns {sorted(batch.keys())} differ from the buffer's {sorted(self.columns)}"
            )
        if n > self.capacity:  # only the newest rows fit
            batch = batch.slice(n - self.capacity, n)
            n = self.capacity
        idx = (self.next_idx + np.arange(n)) % self.capacity
        first = min(n, self.capacity - self.next_idx)  # contiguous writes: at most two slices
        for k, col in self.columns.items():
            values = batch[k]
            col[self.next_idx : self.next_idx + first] = values[:first]
            if first < n:
                col[: n - first] = values[first:]
        self.next_idx = (self.next_idx + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.added += n
        return idx

    def sample(self, num_items: int) -> tuple[SampleBatch, np.ndarray]:
        """`num_items` rows drawn uniformly with replacement; returns (batch, slot indices)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = self.rng.integers(0, self.size, size=num_items)
        return self._gather(idx, np.ones(num_items, dtype=np.float32)), idx

    def _gather(self, idx: np.ndarray, weights: np.ndarray) -> SampleBatch:
        out = {k: col[idx] for k, col in self.columns.items()}
        out[REPLAY_WEIGHTS] = weights
        return SampleBatch(out)

    def update_priorities(self, idx: np.ndarray, priorities: np.ndarray) -> None:
        """Uniform replay has no priorities."""

    # -- checkpoint state (plain arrays and numbers) ---------------------------
    def get_state(self) -> dict:
        state = {"size": self.size, "next_idx": self.next_idx, "added": self.added, "rng": self.rng.bit_generator.state}
        if self.columns is not None:
            state["columns"] = {k: v[: self.size].copy() for k, v in self.columns.items()}
        return state

    def set_state(self, state: dict) -> None:
        self.size, self.next_idx, self.added = int(state["size"]), int(state["next_idx"]), int(state["added"])
        self.rng.bit_generator.state = state["rng"]
        cols = state.get("columns")
        if cols is not None:
            self.columns = {k: np.zeros((self.capacity,) + np.asarray(v).shape[1:], np.asarray(v).dtype) for k, v in cols.items()}
            for k, v in cols.items():
                self.columns[k][: self.size] = v


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritised replay: P(i) = p_i^alpha / sum_j p_j^alpha.

    Importance weights w_i = (N * P(i))^-beta, divided by the largest possible
    weight (that of the lowest-priority row), so w <= 1. Beta anneals linearly
    from `beta` to `beta_final` over `beta_annealing_steps` added rows. New rows
    get the highest priority seen so far, so each is replayed at least once soon.
    """

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_annealing_steps: int = 0,
        eps: float = 1e-6,
        seed: int | None = None,
    ):
        super().__init__(capacity, seed)
        if alpha < 0:
            raise ValueError(f"prioritized replay alpha must be >= 0, got {alpha}")
        if not 0 <= beta <= 1 or not 0 <= beta_final <= 1:
            raise ValueError(f"prioritized replay beta must be in [0, 1], got {beta} -> {beta_final}")
        self.alpha, self.beta0, self.beta_final = float(alpha), float(beta), float(beta_final)
        self.beta_annealing_steps = int(beta_annealing_steps)
        self.eps = float(eps)
        self.sum_tree = SumSegmentTree(self.capacity)
        self.min_tree = MinSegmentTree(self.capacity)
        self.max_priority = 1.0

    @property
    def beta(self) -> float:
        if self.beta_annealing_steps <= 0:
            return self.beta0
        frac = min(1.0, self.added / self.beta_annealing_steps)
        return self.beta0 + frac * (self.beta_final - self.beta0)

    def add(self, batch: SampleBatch) -> np.ndarray:
        idx = super().add(batch)
        if len(idx):
            set_leaves([self.sum_tree, self.min_tree], idx, self.max_priority**self.alpha)
        return idx

    def sample(self, num_items: int, beta: float | None = None) -> tuple[SampleBatch, np.ndarray]:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        beta = self.beta if beta is None else float(beta)
        total = self.sum_tree.reduce()
        # Stratified: one uniform draw inside each of num_items equal slices of the total mass.
        mass = (np.arange(num_items) + self.rng.random(num_items)) * (total / num_items)
        idx = np.minimum(self.sum_tree.find_prefixsum_idx(mass), self.size - 1)
        p = self.sum_tree[idx] / total
        p_min = self.min_tree.reduce() / total
        weights = (p / p_min) ** (-beta)  # = (N p)^-beta / (N p_min)^-beta
        return self._gather(idx, weights.astype(np.float32)), idx

    def update_priorities(self, idx: np.ndarray, priorities: np.ndarray) -> None:
        """Sets |TD error|-based priorities for replayed rows (eps keeps every row reachable)."""
        idx = np.asarray(idx, dtype=np.int64)
        priorities = np.abs(np.asarray(priorities, dtype=np.float64)) + self.eps
        if len(idx) != len(priorities):
            raise ValueError(f"update_priorities got {len(idx)} indices and {len(priorities)} priorities")
        if np.any(~np.isfinite(priorities)):
            raise ValueError("update_priorities got non-finite priorities (NaN or inf TD errors)")
        set_leaves([self.sum_tree, self.min_tree], idx, priorities**self.alpha)
        self.max_priority = max(self.max_priority, float(priorities.max()))

    def get_state(self) -> dict:
        state = super().get_state()
        state["priorities"] = self.sum_tree[np.arange(self.size)].copy()
        state["max_priority"] = self.max_priority
        return state

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.sum_tree = SumSegmentTree(self.capacity)
        self.min_tree = MinSegmentTree(self.capacity)
        if self.size:
            set_leaves([self.sum_tree, self.min_tree], np.arange(self.size), state["priorities"])
        self.max_priority = float(state["max_priority"])


def make_replay_buffer(capacity: int, prioritized: bool, alpha: float, beta: float, beta_final: float,
                       beta_annealing_steps: int, seed: int | None) -> ReplayBuffer:
    if prioritized:
        return PrioritizedReplayBuffer(capacity, alpha, beta, beta_final, beta_annealing_steps, seed=seed)
    return ReplayBuffer(capacity, seed=seed)


def buffer_settings(training) -> dict:
    """`make_replay_buffer`'s settings from a training section's replay keys (DQN's, SAC's and their kin)."""
    return {
        "capacity": training.replay_capacity,
        "prioritized": training.prioritized_replay,
        "alpha": training.prioritized_replay_alpha,
        "beta": training.prioritized_replay_beta,
        "beta_final": training.prioritized_replay_beta_final,
        "beta_annealing_steps": training.prioritized_replay_beta_annealing_steps,
    }
