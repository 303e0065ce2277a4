"""Running mean/std statistics that many runners keep in step (the state behind the `mean_std` piece).

Its own module because it is arithmetic on (count, mean, M2) with a sync protocol (central part, local delta),
not a pipeline step: the piece (`marl.connectors.env_to_module.MeanStd`) wraps it, and tests use it alone.
"""

from __future__ import annotations

import numpy as np


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
