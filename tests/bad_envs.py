"""Envs that break the multi-agent env contract in one chosen way (used by tests/bad_scenarios/).

Scenario files name it by module path, `env: tests.bad_envs`, and pick the
fault with `env_config: {fault: ...}`; `parallel_env()` returns a marl
MultiAgentEnv directly. Two simultaneous-move agents, 3-float observations
in [-1, 1], two actions, 20-step episodes; the fault happens at `at_step`.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from marl.envs import MultiAgentEnv

FAULTS = ("none", "missing_agent", "unknown_reward", "obs_outside", "obs_shape", "unknown_obs_agent", "no_all_flag",
          "nan_reward", "bad_return", "raises", "empty_reset", "unknown_flag_agent", "nan_obs")


class BadEnv(MultiAgentEnv):
    possible_agents = ["a0", "a1"]
    metadata = {"name": "bad_env", "turn_based": False}

    def __init__(self, fault: str = "none", at_step: int = 3):
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}")
        self.fault, self.at_step = fault, at_step
        self.obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.act_space = gym.spaces.Discrete(2)
        self.t = 0
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return self.obs_space

    def action_space(self, agent):
        return self.act_space

    def _obs(self):
        return {a: self.rng.uniform(-1, 1, 3).astype(np.float32) for a in self.possible_agents}

    def reset(self, seed=None):
        self.rng = np.random.default_rng(seed)
        self.t = 0
        if self.fault == "empty_reset":
            return {}, {}
        return self._obs(), {}

    def step(self, actions):
        self.t += 1
        obs = self._obs()
        rewards = {a: float(actions[a]) for a in actions}
        done = self.t >= 20
        terms = {"a0": False, "a1": False, "__all__": done}
        truncs = {"a0": False, "a1": False, "__all__": done}
        if self.t == self.at_step:
            fault = self.fault
            if fault == "missing_agent":
                del obs["a1"]
            elif fault == "unknown_reward":
                rewards["ghost"] = 1.0
            elif fault == "obs_outside":
                obs["a0"][1] = 5.0
            elif fault == "obs_shape":
                obs["a1"] = np.zeros(4, np.float32)
            elif fault == "unknown_obs_agent":
                obs["intruder"] = np.zeros(3, np.float32)
            elif fault == "no_all_flag":
                del terms["__all__"]
            elif fault == "nan_reward":
                rewards["a1"] = float("nan")
            elif fault == "bad_return":
                return obs, rewards, terms, truncs
            elif fault == "raises":
                raise RuntimeError("sensor failure")
            elif fault == "unknown_flag_agent":
                terms["a7"] = True
            elif fault == "nan_obs":
                obs["a0"][2] = np.nan
        return obs, rewards, terms, truncs, {}


def parallel_env(fault: str = "none", at_step: int = 3):
    return BadEnv(fault, at_step)
