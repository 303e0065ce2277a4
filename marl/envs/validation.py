"""Checks of what an env returns, against the `MultiAgentEnv` contract.

Runners always check the shape of a step result (a 5-tuple of dicts);
with `debugging(validate_env=True)` they also check every reset and step:
observations and rewards only for known agents, observations inside the
agent's observation space, finite rewards, the `"__all__"` flags, and (for
simultaneous-move envs) no live agent silently missing from the next
observations. Each failure is one `EnvOutputError` naming the env, the
agent and the episode step.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from marl.envs.base import ALL, EnvError


class EnvOutputError(EnvError):
    """An env returned something the multi-agent env contract does not allow (a bug in the env, not retried)."""


class EnvStepError(EnvError):
    """An env raised while resetting or stepping; the runner is rebuilt and the sample retried."""


def unpack_step(result, where: str):
    """(obs, rewards, terminateds, truncateds, infos), or a clear error for anything else."""
    if not isinstance(result, tuple) or len(result) != 5:
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise EnvOutputError(f"{where}: step() must return (obs, rewards, terminateds, truncateds, infos), got {got}")
    obs, rewards, terminateds, truncateds, infos = result
    for name, value in (("obs", obs), ("rewards", rewards), ("terminateds", terminateds), ("truncateds", truncateds)):
        if not isinstance(value, dict):
            raise EnvOutputError(f"{where}: step() must return {name} as a dict keyed by agent id, got {type(value).__name__}")
    return result


def outside_reason(space: gym.Space, value) -> str:
    """Why `value` is not in `space` (shape, dtype, bounds), in a few words."""
    if isinstance(space, gym.spaces.Box):
        arr = np.asarray(value)
        if arr.shape != space.shape:
            return f"shape {arr.shape}, expected {space.shape}"
        if not np.can_cast(arr.dtype, space.dtype, casting="same_kind"):
            return f"dtype {arr.dtype}, expected {space.dtype}"
        if np.isnan(arr).any():
            return "it contains NaN"
        low_bad = np.argwhere(arr < space.low)
        if len(low_bad):
            i = tuple(int(x) for x in low_bad[0])
            return f"value {arr[i]} at index {list(i)} is below the lower bound {space.low[i]}"
        high_bad = np.argwhere(arr > space.high)
        if len(high_bad):
            i = tuple(int(x) for x in high_bad[0])
            return f"value {arr[i]} at index {list(i)} is above the upper bound {space.high[i]}"
        return "not contained"
    if isinstance(space, gym.spaces.Dict) and isinstance(value, dict):
        missing = sorted(set(space.spaces) - set(value))
        if missing:
            return f"keys {missing} are missing"
        for key, sub in space.spaces.items():
            if not sub.contains(value[key]):
                return f"'{key}': {outside_reason(sub, value[key])}"
    return f"value {value!r:.80} is not in the space"


class EnvChecker:
    """Validates one env copy's outputs; `label` names the env and where it runs."""

    def __init__(self, env, label: str):
        self.label = label
        self.possible = set(env.possible_agents)
        self.possible_list = list(env.possible_agents)
        self.turn_based = bool(env.metadata.get("turn_based", False))
        self.spaces = {a: env.observation_space(a) for a in env.possible_agents}

    def _unknown(self, what: str, agent, t: int) -> EnvOutputError:
        return EnvOutputError(
            f"{self.label} returned {what} for unknown agent '{agent}' at episode step {t}; "
            f"possible agents: {self.possible_list}"
        )

    def _check_obs(self, obs: dict, t: int) -> None:
        for agent, ob in obs.items():
            if agent not in self.possible:
                raise self._unknown("an observation", agent, t)
            space = self.spaces[agent]
            if not space.contains(ob):
                raise EnvOutputError(
                    f"{self.label}: the observation of agent '{agent}' at episode step {t} is outside its observation "
                    f"space {space}: {outside_reason(space, ob)}"
                )

    def check_reset(self, obs) -> None:
        if not isinstance(obs, dict):
            raise EnvOutputError(f"{self.label}: reset() must return (obs dict, infos), got obs of type {type(obs).__name__}")
        if not obs:
            raise EnvOutputError(f"{self.label}: reset() returned no observation: no agent can act first")
        self._check_obs(obs, 0)

    def check_step(self, actions: dict, obs: dict, rewards: dict, terminateds: dict, truncateds: dict, t: int) -> None:
        """`t` is the episode step the result belongs to (1 after the first step)."""
        unpack_step((obs, rewards, terminateds, truncateds, {}), self.label)  # each part a dict
        for name, flags in (("terminateds", terminateds), ("truncateds", truncateds)):
            if ALL not in flags:
                raise EnvOutputError(
                    f"{self.label}: {name} at episode step {t} has no '{ALL}' key (agents: {sorted(flags)}); "
                    f"it must say whether the episode is over for everyone"
                )
            for agent in flags:
                if agent != ALL and agent not in self.possible:
                    raise self._unknown(f"a '{name}' flag", agent, t)
        for agent, reward in rewards.items():
            if agent not in self.possible:
                raise self._unknown("a reward", agent, t)
            try:
                value = float(reward)
            except (TypeError, ValueError):
                raise EnvOutputError(
                    f"{self.label}: the reward of agent '{agent}' at episode step {t} is not a number: {reward!r}"
                ) from None
            if not math.isfinite(value):
                raise EnvOutputError(f"{self.label}: the reward of agent '{agent}' at episode step {t} is {value}")
        self._check_obs(obs, t)
        done = terminateds[ALL] or truncateds[ALL]
        if done:
            return
        ended = {a for a, d in terminateds.items() if d} | {a for a, d in truncateds.items() if d}
        if not self.turn_based:
            missing = [a for a in actions if a not in obs and a not in ended]
            if missing:
                raise EnvOutputError(
                    f"{self.label}: agent '{missing[0]}' acted at episode step {t - 1} but is missing from the "
                    f"observations of step {t} without being terminated or truncated"
                )
        if not (set(obs) - ended):
            raise EnvOutputError(
                f"{self.label}: no agent is left to act at episode step {t}, but '{ALL}' is not set in terminateds/truncateds"
            )
