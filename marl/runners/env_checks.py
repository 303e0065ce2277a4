"""The checks a runner always makes at the env boundary, cheap enough for every step.

`debugging.validate_env` checks everything an env returns against the contract
(`marl.envs.validation.EnvChecker`: spaces, NaN, flags, missing agents). Two faults
would otherwise surface deep inside the runner as a bare KeyError or NumPy
traceback, so they are checked on every run: an agent outside `possible_agents`
in the observations, rewards or flags (one C-level set comparison per dict per
step), and an observation whose shape does not fit its space (diagnosed only when
batching the observations failed: nothing on the happy path).
"""

from __future__ import annotations

import numpy as np

from marl.envs.base import ALL
from marl.envs.validation import EnvOutputError


class BoundaryCheck:
    def __init__(self, env):
        self.possible_list = list(env.possible_agents)
        self.possible = frozenset(self.possible_list)
        self.flag_keys = self.possible | {ALL}
        self.spaces = {a: env.observation_space(a) for a in self.possible_list}

    def _unknown(self, label: str, what: str, keys, allowed, t: int) -> EnvOutputError:
        agent = next(a for a in keys if a not in allowed)
        return EnvOutputError(
            f"{label} returned {what} for unknown agent '{agent}' at episode step {t}; possible agents: {self.possible_list}"
        )

    def reset(self, obs, label, t: int = 0) -> None:
        if not isinstance(obs, dict):
            raise EnvOutputError(f"{label()}: reset() must return (obs dict, infos), got obs of type {type(obs).__name__}")
        if not self.possible.issuperset(obs):
            raise self._unknown(label(), "an observation", obs, self.possible, t)

    def step(self, obs, rewards, terminateds, truncateds, label, t: int) -> None:
        """`label()` names the env copy (built only for the message)."""
        possible = self.possible
        if not possible.issuperset(obs):
            raise self._unknown(label(), "an observation", obs, possible, t)
        if not possible.issuperset(rewards):
            raise self._unknown(label(), "a reward", rewards, possible, t)
        for name, flags in (("terminateds", terminateds), ("truncateds", truncateds)):
            if not self.flag_keys.issuperset(flags):
                raise self._unknown(label(), f"a '{name}' flag", flags, self.flag_keys, t)

    def shape_error(self, raw_obs: list, agents: list, label: str, err: Exception) -> EnvOutputError | None:
        """Why a block of observations could not be batched: the first one whose shape is not its space's."""
        for agent, ob in zip(agents, raw_obs):
            space = self.spaces.get(agent)
            shape = getattr(space, "shape", None)
            if shape is None or isinstance(ob, dict):
                continue
            got = np.shape(ob) if not isinstance(ob, np.ndarray) else ob.shape
            try:
                fits = got == shape or int(np.prod(got)) == int(np.prod(shape)) and np.asarray(ob).size == int(np.prod(shape))
            except (TypeError, ValueError):
                fits = False
            if got != shape and not fits:
                return EnvOutputError(
                    f"{label}: the observation of agent '{agent}' has shape {got}; its observation space "
                    f"{space} has shape {shape} ({type(err).__name__} while batching: {str(err).splitlines()[0][:120]})"
                )
        return None
