"""A team of three agents for the HAPPO and MAT tests: obs = [t, agent number], 5 steps an episode, Discrete(k)
actions, each agent rewarded by `reward(actions)`; registered under the names the tests use."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from marl import MultiAgentEnv, register_env

AGENTS = ["a0", "a1", "a2"]


class Team(MultiAgentEnv):
    def __init__(self, reward, num_actions: int, state=None):
        self.possible_agents = list(AGENTS)
        self.metadata = {"name": "team", "turn_based": False}
        self.reward, self.num_actions, self.t = reward, num_actions, 0
        self._state = state

    def observation_space(self, agent):
        return gym.spaces.Box(-10, 10, (2,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(self.num_actions)

    def _obs(self):
        return {a: np.array([self.t, i], np.float32) for i, a in enumerate(self.possible_agents)}

    def reset(self, seed=None):
        self.t = 0
        return self._obs(), {}

    def step(self, actions):
        self.t += 1
        done = self.t >= 5
        flags = {a: False for a in actions}
        rewards = self.reward(actions)
        return (self._obs(), rewards, {**flags, "__all__": False}, {**{a: done for a in actions}, "__all__": done}, {})

    def state(self):
        return self._state


# each agent rewarded 1 for action 1 (HAPPO); all rewarded 1 when all pick the same action, with a state() that MAT
# does not read (its tokens are the agents' observations)
register_env("happo_pick", lambda cfg: Team(lambda acts: {a: float(acts[a]) for a in acts}, 2))
register_env("mat_match", lambda cfg: Team(lambda acts: dict.fromkeys(acts, float(len(set(acts.values())) == 1)), 3,
                                           state=np.zeros(1, np.float32)))
