"""module -> env: turn a batch of sampled actions into per-agent env actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ActionAdapter:
    """Discrete -> Python ints; MultiDiscrete -> int rows; Box -> clipped (or unsquashed) float rows.

    `unsquash_actions`: the module acts in [-1, 1] and actions are rescaled to
    the space's bounds; `clip_actions`: actions are clipped to the bounds
    (the batch keeps the unclipped sample, so log-probs stay exact).
    """

    def __init__(self, space: gym.Space, clip_actions: bool = True, unsquash_actions: bool = False):
        self.space = space
        if isinstance(space, gym.spaces.Discrete):
            self.dtype, self.shape = np.int64, ()
            self._convert = self._discrete
        elif isinstance(space, gym.spaces.MultiDiscrete):
            self.dtype, self.shape = np.int64, tuple(space.shape)
            self._convert = self._multi_discrete
        elif isinstance(space, gym.spaces.Box):
            self.dtype, self.shape = np.float32, tuple(space.shape)
            self.low = np.broadcast_to(space.low, space.shape).astype(np.float32)
            self.high = np.broadcast_to(space.high, space.shape).astype(np.float32)
            self.clip, self.unsquash = clip_actions, unsquash_actions
            self._convert = self._box
        else:
            raise TypeError(f"unsupported action space {space}; supported: Discrete, MultiDiscrete, Box")

    def _discrete(self, actions: np.ndarray) -> list:
        start = int(self.space.start)
        return actions.tolist() if start == 0 else (actions + start).tolist()

    def _multi_discrete(self, actions: np.ndarray) -> list:
        return list(actions.reshape((len(actions),) + self.shape) + self.space.start)

    def _box(self, actions: np.ndarray) -> list:
        a = actions.reshape((len(actions),) + self.shape)
        if self.unsquash:
            a = self.low + (np.clip(a, -1.0, 1.0) + 1.0) * 0.5 * (self.high - self.low)
        elif self.clip:
            a = np.clip(a, self.low, self.high)
        return list(a.astype(self.space.dtype, copy=False))

    def __call__(self, actions: np.ndarray) -> list:
        return self._convert(actions)
