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


def is_multi_agent_tuple_env(env: Any) -> bool:
    """A Gymnasium env whose observation and action spaces are Tuples with one entry per agent
    (lbforaging, rware, ma-gym and the like)."""
    obs_space = getattr(env, "observation_space", None)
    act_space = getattr(env, "action_space", None)
    return (
        isinstance(obs_space, gymnasium.spaces.Tuple)
        and isinstance(act_space, gymnasium.spaces.Tuple)
        and len(obs_space.spaces) == len(act_space.spaces) > 0
    )


class TupleMultiAgentAdapter(MultiAgentEnv):
    """A Gymnasium env with one Tuple entry per agent, as agents ``agent_0 .. agent_{n-1}``.

    Observations, actions and per-agent reward lists are split by position. Rewards are
    passed on as the env gives them: a list gives each agent its own entry (lbforaging's
    individual rewards, rware's individual or global ones); a single number is a team
    reward every agent receives. ``terminated``/``truncated`` may be one flag for the
    episode or one per agent; every agent acts at every step until the episode ends
    (per-agent flags end the episode once every agent's is set).
    """

    def __init__(self, env: gymnasium.Env) -> None:
        self.env = env
        self.n = len(env.action_space.spaces)
        self.possible_agents = [f"agent_{i}" for i in range(self.n)]
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        raw_meta = getattr(env, "metadata", None) or {}
        self.metadata = {**raw_meta, "name": env_name(env), "turn_based": False}
        self._obs_spaces = list(env.observation_space.spaces)
        self._act_spaces = list(env.action_space.spaces)
        self._env_step = env.step

    def _slot(self, agent: AgentID) -> int:
        try:
            return self._index[agent]
        except KeyError:
            raise EnvError(
                f"env {self.metadata['name']!r} has no agent {agent!r}; possible agents: {self.possible_agents}"
            ) from None

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        return self._obs_spaces[self._slot(agent)]

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        return self._act_spaces[self._slot(agent)]

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        obs, info = self.env.reset(seed=seed)
        agents = self.possible_agents
        return dict(zip(agents, obs)), {a: info for a in agents}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        agents = self.possible_agents
        try:
            joint = tuple(actions[a] for a in agents)
        except KeyError:
            missing = [a for a in agents if a not in actions]
            raise EnvError(
                f"env {self.metadata['name']!r}: every agent acts at every step; no action for {missing}"
            ) from None
        obs, reward, terminated, truncated, info = self._env_step(joint)
        if np.ndim(reward) == 0:  # one team reward: each agent receives it
            rewards = dict.fromkeys(agents, float(reward))
        else:
            rewards = {a: float(r) for a, r in zip(agents, reward)}
        terms = self._flags(terminated)
        truncs = self._flags(truncated)
        done = all(terms[a] or truncs[a] for a in agents)
        if not done:  # per-agent flags (ma-gym style): agents keep acting until all are done
            terms = dict.fromkeys(agents, False)
            truncs = dict.fromkeys(agents, False)
        terms[ALL] = truncs[ALL] = done
        return dict(zip(agents, obs)), rewards, terms, truncs, {a: info for a in agents}

    def _flags(self, flag: Any) -> dict[str, bool]:
        if np.ndim(flag) == 0:
            return dict.fromkeys(self.possible_agents, bool(flag))
        return {a: bool(f) for a, f in zip(self.possible_agents, flag)}

    def np_random_source(self):
        rng = getattr(self.env.unwrapped, "np_random", None)
        return rng if isinstance(rng, (np.random.Generator, np.random.RandomState)) else None

    def close(self) -> None:
        self.env.close()
