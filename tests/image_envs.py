"""A small image task for the conv path (`env: tests.image_envs`): "which quadrant is lit?".

Two simultaneous-move agents each see their own uint8 image (size x size x channels, or
channels first with `channels_first: true`), dark except for a 3x3 bright block in one of
its four quadrants; the action names the quadrant (Discrete(4)) and is rewarded 1 when
right. The block is redrawn every step, so only reading the image helps: chance is 0.25
per step (episode return 2 of 8), a policy that reads it earns 8.

`dict_obs: true`: each observation is a Dict {"image": the frame, "flip": Discrete(2),
"noise": Box(2)} and the answer is the lit quadrant when flip is 0, the opposite one
(3 - quadrant) when it is 1: only a policy that reads both the image and the flag earns 8.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from marl.envs import MultiAgentEnv


class QuadrantEnv(MultiAgentEnv):
    possible_agents = ["a0", "a1"]
    metadata = {"name": "quadrant_image", "turn_based": False}

    def __init__(self, size: int = 16, channels: int = 1, channels_first: bool = False, episode_len: int = 8,
                 dict_obs: bool = False):
        self.size, self.channels, self.channels_first, self.episode_len = size, channels, channels_first, episode_len
        shape = (channels, size, size) if channels_first else (size, size, channels)
        self.obs_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.dict_obs = dict_obs
        if dict_obs:
            self.obs_space = gym.spaces.Dict({"image": self.obs_space, "flip": gym.spaces.Discrete(2),
                                              "noise": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
        self.act_space = gym.spaces.Discrete(4)
        self.rng = np.random.default_rng()
        self.t = 0
        self.answer: dict[str, int] = {}

    def observation_space(self, agent):
        return self.obs_space

    def action_space(self, agent):
        return self.act_space

    def _image(self, quadrant: int) -> np.ndarray:
        half = self.size // 2
        img = np.zeros((self.size, self.size), np.uint8)
        r = self.rng.integers(0, half - 2) + (half if quadrant >= 2 else 0)
        c = self.rng.integers(0, half - 2) + (half if quadrant % 2 else 0)
        img[r : r + 3, c : c + 3] = 255
        return np.repeat(img[None], self.channels, 0) if self.channels_first else np.repeat(img[..., None], self.channels, 2)

    def _obs(self):
        self.answer = {a: int(self.rng.integers(4)) for a in self.possible_agents}
        if not self.dict_obs:
            return {a: self._image(q) for a, q in self.answer.items()}
        obs = {}
        for a, q in self.answer.items():
            flip = int(self.rng.integers(2))
            obs[a] = {"image": self._image(q), "flip": flip, "noise": self.rng.uniform(-1, 1, 2).astype(np.float32)}
            self.answer[a] = 3 - q if flip else q
        return obs

    def reset(self, seed=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, actions):
        rewards = {a: float(int(actions[a]) == self.answer[a]) for a in actions}
        self.t += 1
        done = self.t >= self.episode_len
        flags = {a: False for a in self.possible_agents}
        return self._obs(), rewards, {**flags, "__all__": False}, {**flags, "__all__": done}, {}


def parallel_env(**config):
    return QuadrantEnv(**config)
