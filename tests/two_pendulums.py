"""Two independent Pendulum-v1 copies as two agents (RLlib's MultiAgentPendulum): each agent swings its own
pendulum; both episodes last 200 steps, so they end together. Register with `register()`."""

from __future__ import annotations

import gymnasium as gym

from marl.envs.base import ALL, MultiAgentEnv

AGENTS = ["pendulum_0", "pendulum_1"]


class TwoPendulums(MultiAgentEnv):
    possible_agents = AGENTS
    metadata = {"name": "two_pendulums", "turn_based": False}

    def __init__(self, env_config: dict | None = None):
        self.envs = {a: gym.make("Pendulum-v1") for a in AGENTS}

    def observation_space(self, agent):
        return self.envs[agent].observation_space

    def action_space(self, agent):
        return self.envs[agent].action_space

    def reset(self, seed=None):
        obs = {}
        for i, (agent, env) in enumerate(self.envs.items()):
            obs[agent], _ = env.reset(seed=None if seed is None else seed + i)
        return obs, {a: {} for a in AGENTS}

    def step(self, actions):
        obs, rewards, terminateds, truncateds = {}, {}, {}, {}
        for agent, action in actions.items():
            obs[agent], reward, terminateds[agent], truncateds[agent], _ = self.envs[agent].step(action)
            rewards[agent] = float(reward)
        done = all(terminateds[a] or truncateds[a] for a in actions)
        terminateds[ALL] = truncateds[ALL] = done
        return obs, rewards, terminateds, truncateds, {a: {} for a in actions}

    def close(self):
        for env in self.envs.values():
            env.close()


def register(name: str = "two_pendulums") -> str:
    from marl import register_env

    register_env(name, lambda cfg: TwoPendulums(cfg))
    return name
