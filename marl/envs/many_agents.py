"""A synthetic multi-agent env whose own cost per agent is tiny, so a runner's per-agent cost shows.

`ManyAgentsEnv(num_agents, obs_dim, num_actions, episode_length)`: every agent acts at
every step; its observation is a slice of one NumPy array the env updates in one
vectorised call, its reward is 1 when its action matches a target that moves with
the step (so a policy can learn it); every agent ends together at `episode_length`.
Importing this module registers it as `many_agents` (env_config: num_agents, obs_dim, num_actions,
episode_length); `benchmarks/speed/many_agents.py` and `tests/test_many_agents.py` use it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from marl.envs.base import ALL, MultiAgentEnv
from marl.envs.registry import register_env


class ManyAgentsEnv(MultiAgentEnv):
    def __init__(self, num_agents: int = 100, obs_dim: int = 16, num_actions: int = 5, episode_length: int = 100):
        self.num_agents, self.obs_dim, self.num_actions = int(num_agents), int(obs_dim), int(num_actions)
        self.episode_length = int(episode_length)
        self.possible_agents = [f"agent_{i}" for i in range(self.num_agents)]
        self.metadata = {"name": "many_agents", "turn_based": False}
        self._obs_space = gym.spaces.Box(-1.0, 1.0, (self.obs_dim,), np.float32)
        self._act_space = gym.spaces.Discrete(self.num_actions)
        self.np_random = np.random.default_rng(0)
        self._obs = np.zeros((self.num_agents, self.obs_dim), np.float32)
        self._t = 0

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_space

    def _observations(self) -> dict:
        rows = self._obs
        return dict(zip(self.possible_agents, rows))  # views into one array: no per-agent copies

    def reset(self, seed=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self._t = 0
        self._obs = self.np_random.uniform(-1, 1, (self.num_agents, self.obs_dim)).astype(np.float32)
        return self._observations(), {}

    def step(self, actions):
        acts = np.fromiter(actions.values(), dtype=np.int64, count=len(actions))
        target = (np.argmax(self._obs[:, : self.num_actions], axis=1))[: len(acts)]
        rewards = dict(zip(actions, (acts == target).astype(np.float32).tolist()))
        self._t += 1
        self._obs = np.roll(self._obs, 1, axis=1)
        self._obs[:, 0] = self.np_random.uniform(-1, 1, self.num_agents).astype(np.float32)
        done = self._t >= self.episode_length
        flags = dict.fromkeys(self.possible_agents, done) if done else {}
        terminateds = {**flags, ALL: done}
        truncateds = {ALL: done}
        return self._observations(), rewards, terminateds, truncateds, {}


def make_many_agents(config: dict) -> ManyAgentsEnv:
    return ManyAgentsEnv(**config)


register_env("many_agents", make_many_agents)
