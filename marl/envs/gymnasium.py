"""Adapter presenting a single-agent ``gymnasium.Env`` as a one-agent :class:`MultiAgentEnv`.

Single-agent envs such as CartPole step at ~100k steps/s, so ``step`` does
nothing beyond building the five small result dicts.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from marl.envs.base import (
    ALL,
    AgentID,
    EnvError,
    InfoDict,
    MultiAgentEnv,
    ObsDict,
    StepResult,
    env_name,
)


class GymnasiumAdapter(MultiAgentEnv):
    """Wraps ``gym_env`` as the single agent ``agent_id``; ``state()`` is always ``None``."""

    def __init__(self, env: gymnasium.Env, agent_id: AgentID = "agent_0") -> None:
        self.env = env
        self.agent_id = agent_id
        self.possible_agents = [agent_id]
        raw_meta = getattr(env, "metadata", None) or {}
        self.metadata = {**raw_meta, "name": env_name(env), "turn_based": False}
        self._env_step = env.step  # bound once: saves an attribute lookup per step

    def _check_agent(self, agent: AgentID) -> None:
        if agent != self.agent_id:
            raise EnvError(
                f"env {self.metadata['name']!r} has no agent {agent!r}; "
                f"possible agents: {self.possible_agents}"
            )

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        self._check_agent(agent)
        return self.env.observation_space

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        self._check_agent(agent)
        return self.env.action_space

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        obs, info = self.env.reset(seed=seed)
        aid = self.agent_id
        return {aid: obs}, {aid: info}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        aid = self.agent_id
        try:
            action = actions[aid]
        except KeyError:
            raise EnvError(
                f"env {self.metadata['name']!r}: expected an action for {aid!r}, "
                f"got actions for {list(actions)}"
            ) from None
        obs, reward, terminated, truncated, info = self._env_step(action)
        # bool(): some envs return numpy bools, and the protocol promises Python types.
        terminated = bool(terminated)
        truncated = bool(truncated)
        done = terminated or truncated
        return (
            {aid: obs},
            {aid: float(reward)},
            {aid: terminated, ALL: done},
            {aid: truncated, ALL: done},
            {aid: info},
        )

    def np_random_source(self):
        rng = getattr(self.env.unwrapped, "np_random", None)
        return rng if isinstance(rng, (np.random.Generator, np.random.RandomState)) else None

    def close(self) -> None:
        self.env.close()
