"""env -> module: turn a list of raw observations into one float32 array.

One preprocessor per policy. It flattens (Box reshape, Discrete one-hot, any
other space through gymnasium's flatten), splits off PettingZoo action masks,
and optionally normalises with running mean/std statistics.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from marl.modules.spaces import flat_obs_dim, is_masked_space, observation_part


class MeanStdFilter:
    """Running mean/std with a synced central part and a local delta.

    Runners normalise with (central + delta) and ship the delta with each batch;
    the learner side merges every delta into the central statistics and sends
    them back with the weights, so all runners converge on the same filter.
    """

    def __init__(self, dim: int, clip: float = 10.0, eps: float = 1e-8):
        self.dim, self.clip, self.eps = dim, clip, eps
        self.central = self.empty_stats(dim)
        self.delta = self.empty_stats(dim)
        self._combined = None

    @staticmethod
    def empty_stats(dim: int) -> dict:
        return {"count": 0.0, "mean": np.zeros(dim, np.float64), "m2": np.zeros(dim, np.float64)}

    @staticmethod
    def merge(a: dict, b: dict) -> dict:
        """Chan et al.'s parallel update of (count, mean, M2)."""
        n = a["count"] + b["count"]
        if n == 0:
            return {"count": 0.0, "mean": a["mean"].copy(), "m2": a["m2"].copy()}
        d = b["mean"] - a["mean"]
        mean = a["mean"] + d * (b["count"] / n)
        m2 = a["m2"] + b["m2"] + d * d * (a["count"] * b["count"] / n)
        return {"count": n, "mean": mean, "m2": m2}

    def __call__(self, x: np.ndarray, update: bool = True) -> np.ndarray:
        if update and len(x):
            batch = {"count": float(len(x)), "mean": x.mean(0, dtype=np.float64), "m2": x.var(0, dtype=np.float64) * len(x)}
            self.delta = self.merge(self.delta, batch)
            self._combined = None
        if self._combined is None:
            self._combined = self.merge(self.central, self.delta)
        stats = self._combined
        if stats["count"] < 2:
            return x
        std = np.sqrt(stats["m2"] / stats["count"]) + self.eps
        return np.clip((x - stats["mean"]) / std, -self.clip, self.clip).astype(np.float32)

    def pop_delta(self) -> dict:
        delta, self.delta = self.delta, self.empty_stats(self.dim)
        self.central = self.merge(self.central, delta)  # keep normalising with what we have seen
        self._combined = None
        return delta

    def set_state(self, central: dict) -> None:
        self.central = {k: (np.array(v) if k != "count" else float(v)) for k, v in central.items()}
        self._combined = None

    def get_state(self) -> dict:
        return self.central

    def snapshot(self) -> dict:
        """Central statistics and the local delta not yet shipped (what a runner checkpoint keeps)."""
        return {"central": self.central, "delta": self.delta}

    def load_snapshot(self, snapshot: dict) -> None:
        self.set_state(snapshot["central"])
        self.delta = {k: (np.array(v) if k != "count" else float(v)) for k, v in snapshot["delta"].items()}
        self._combined = None


class ObservationPreprocessor:
    """Raw observations of one policy's agents -> (obs float32 [m, d], action_mask or None)."""

    def __init__(self, space: gym.Space, normalize: bool = False):
        self.space = space
        self.masked = is_masked_space(space)
        self.obs_space = observation_part(space)
        self.dim = flat_obs_dim(space)
        if isinstance(self.obs_space, gym.spaces.Box):
            self._flatten = self._flatten_box
        elif isinstance(self.obs_space, gym.spaces.Discrete):
            self._flatten = self._flatten_discrete
        else:
            self._flatten = self._flatten_generic
        self.filter = MeanStdFilter(self.dim) if normalize else None

    def _flatten_box(self, items: list) -> np.ndarray:
        return np.asarray(items, dtype=np.float32).reshape(len(items), self.dim)

    def _flatten_discrete(self, items: list) -> np.ndarray:
        out = np.zeros((len(items), self.dim), np.float32)
        out[np.arange(len(items)), np.asarray(items, dtype=np.int64) - self.obs_space.start] = 1.0
        return out

    def _flatten_generic(self, items: list) -> np.ndarray:
        return np.stack([gym.spaces.flatten(self.obs_space, o) for o in items]).astype(np.float32)

    def __call__(self, raw: list, update_filter: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        if self.masked:
            mask = np.asarray([o["action_mask"] for o in raw], dtype=np.float32)
            obs = self._flatten([o["observation"] for o in raw])
        else:
            mask, obs = None, self._flatten(raw)
        if self.filter is not None:
            obs = self.filter(obs, update=update_filter)
        return obs, mask
