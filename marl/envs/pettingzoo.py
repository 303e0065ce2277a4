"""Adapters from PettingZoo's Parallel and AEC APIs to :class:`MultiAgentEnv`.

The parallel adapter is on the sampling hot path, so it only adds the
``"__all__"`` flag and turns rewards into plain floats.  The AEC adapter
hides PettingZoo's "dead step" dance (terminated agents must be stepped with
``None`` before they disappear) so callers see each ended agent exactly once,
with its final observation, and otherwise only ever the next actor.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from pettingzoo.utils.env import AECEnv, ParallelEnv

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
from marl.envs.mpe_state import state_is_joined_observations
from marl.envs.pettingzoo_conversion import observing_once, upstream_conversion


class _PettingZooBase(MultiAgentEnv):
    """Shared space lookup, ``state()`` and ``close()`` for both PettingZoo APIs."""

    env: Any
    _turn_based: bool = False

    def __init__(self, env: Any) -> None:
        self.env = env
        self.possible_agents = list(env.possible_agents)
        raw_meta = getattr(env, "metadata", None) or {}
        self.metadata = {**raw_meta, "name": env_name(env), "turn_based": self._turn_based}
        # Set once the env has shown it has no state(), so we stop paying for exceptions.
        self._state_unavailable = False

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        try:
            return self.env.observation_space(agent)
        except KeyError:
            raise EnvError(self._unknown_agent(agent)) from None

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        try:
            return self.env.action_space(agent)
        except KeyError:
            raise EnvError(self._unknown_agent(agent)) from None

    def _unknown_agent(self, agent: AgentID) -> str:
        return (
            f"env {self.metadata['name']!r} has no agent {agent!r}; "
            f"possible agents: {self.possible_agents}"
        )

    def state(self) -> np.ndarray | None:
        """The env's ``state()`` as an array, or ``None`` if it has none (never raises)."""
        if self._state_unavailable:
            return None
        try:
            s = self.env.state()
        except (NotImplementedError, AttributeError):
            self._state_unavailable = True
            return None
        except Exception:  # e.g. called before reset; "must not raise" wins
            return None
        if s is None:
            return None
        return s if isinstance(s, np.ndarray) else np.asarray(s)

    def np_random_source(self):
        rng = getattr(self.env.unwrapped, "np_random", None)
        return rng if isinstance(rng, (np.random.Generator, np.random.RandomState)) else None

    def close(self) -> None:
        self.env.close()


def without_guard_wrappers(env: ParallelEnv) -> ParallelEnv:
    """The env with PettingZoo's two guard wrappers taken out of its AEC-to-parallel conversion (in place:
    `make_env` built the env for this adapter alone).

    `parallel_env()` of mpe2, butterfly and SISL is an AEC env converted to the parallel API, wrapped
    first in `AssertOutOfBoundsWrapper` (asserts each action is in its space) and
    `OrderEnforcingWrapper` (errors on a step before reset). The conversion reads about thirty
    attributes per step through their Python `__getattr__` chains: a third of simple_spread's step
    (240 -> 162 us measured). Neither guard can fire under a runner: it resets before stepping, and
    its actions come from the action space (sampled from a distribution over it, clipped or
    unsquashed to its bounds). Only these two wrapper types are skipped; any other wrapper of the
    chain (TerminateIllegalWrapper, a user's own, SuperSuit's) stays where it is. Observations,
    rewards and flags are the same, step for step."""
    from pettingzoo.utils.wrappers import AssertOutOfBoundsWrapper, BaseWrapper, OrderEnforcingWrapper

    conversion = upstream_conversion(env)  # under SuperSuit's / a user's parallel wrappers
    if conversion is None:
        return env
    holder, attribute = conversion, "aec_env"
    inner = getattr(holder, attribute)
    while isinstance(inner, BaseWrapper):
        if type(inner) in (OrderEnforcingWrapper, AssertOutOfBoundsWrapper):
            inner = inner.env
            setattr(holder, attribute, inner)
        else:
            holder, attribute, inner = inner, "env", inner.env
    return env


class ParallelEnvAdapter(_PettingZooBase):
    """Wraps a ``pettingzoo.ParallelEnv`` (all live agents act simultaneously)."""

    _turn_based = False

    def __init__(self, env: ParallelEnv) -> None:
        super().__init__(observing_once(without_guard_wrappers(env)))
        # mpe2: state() is the returned observations joined (marl/envs/mpe_state.py); keep the last ones.
        self._joins_obs = state_is_joined_observations(env)
        self._last_obs: ObsDict = {}

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        obs, infos = self.env.reset(seed=seed)
        if self._joins_obs:
            self._last_obs = obs
        return obs, infos

    def state(self) -> np.ndarray | None:
        if self._joins_obs:
            last = self._last_obs
            parts = [last.get(a) for a in self.possible_agents]
            if all(p is not None for p in parts):
                return np.concatenate(parts, axis=None)
        return super().state()

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        if self._joins_obs:
            self._last_obs = obs
        # The env's own flag dicts may be its internal state: never add keys to them.
        done = not self.env.agents or all(terms[a] or truncs[a] for a in terms)
        terminateds = {**terms, ALL: done}
        truncateds = {**truncs, ALL: done}
        # Plain dict of floats: no defaultdict surprises, no numpy scalars downstream.
        rewards = {a: float(r) for a, r in rewards.items()}
        return obs, rewards, terminateds, truncateds, infos


class AECEnvAdapter(_PettingZooBase):
    """Wraps a ``pettingzoo.AECEnv`` (one agent acts per step: turn-based).

    Observations are passed through unchanged, so e.g. ``connect_four``'s
    ``{"observation", "action_mask"}`` dicts arrive as they are.
    """

    _turn_based = True

    def __init__(self, env: AECEnv) -> None:
        super().__init__(env)
        # Agents the caller knows as alive, and agents already reported ended this
        # episode (so nobody is reported twice, even if the env keeps them around).
        self._alive: set[AgentID] = set()
        self._reported: set[AgentID] = set()

    # -- episode control ---------------------------------------------------

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        env = self.env
        env.reset(seed=seed)
        # Agents dead from the start never act; step them out silently.
        while env.agents and self._is_dead(env.agent_selection):
            env.step(None)
        self._alive = set(env.agents)
        self._reported = set()
        if not env.agents:
            return {}, {}
        agent = env.agent_selection
        return {agent: env.observe(agent)}, {agent: env.infos.get(agent, {})}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        env = self.env
        if not self._alive:
            raise EnvError(
                f"env {self.metadata['name']!r}: step() called with no live agents; "
                "call reset() first"
            )
        agent = env.agent_selection
        if len(actions) != 1 or agent not in actions:
            raise EnvError(
                f"turn-based env {self.metadata['name']!r}: expected an action for "
                f"{agent!r} (the agent to act), got actions for {list(actions)}"
            )
        env.step(actions[agent])

        obs: ObsDict = {}
        rewards: dict[AgentID, float] = {}
        terminateds: dict[str, bool] = {}
        truncateds: dict[str, bool] = {}
        infos: InfoDict = {}
        self._add_rewards(rewards)
        self._collect_ended(obs, terminateds, truncateds, infos)
        # PettingZoo keeps dead agents until they are stepped with None; do that here
        # so the caller only ever sees live actors.
        while env.agents and self._is_dead(env.agent_selection):
            env.step(None)
            self._add_rewards(rewards)
            self._collect_ended(obs, terminateds, truncateds, infos)
        agents = env.agents
        present = set(agents)
        if not present >= self._alive:
            self._collect_vanished(present, obs, terminateds, truncateds, infos)
        # Agents may also join mid-episode; they are alive from now on.
        self._alive = present - self._reported
        if agents:
            nxt = env.agent_selection
            obs[nxt] = env.observe(nxt)
            infos[nxt] = env.infos.get(nxt, {})
        done = not agents or all(self._is_dead(a) for a in agents)
        terminateds[ALL] = done
        truncateds[ALL] = done
        return obs, rewards, terminateds, truncateds, infos

    # -- helpers -----------------------------------------------------------

    def _is_dead(self, agent: AgentID) -> bool:
        env = self.env
        return bool(env.terminations.get(agent, False) or env.truncations.get(agent, False))

    def _add_rewards(self, rewards: dict[AgentID, float]) -> None:
        """Accumulate ``env.rewards`` (the last env step's rewards) into ``rewards``."""
        for a, r in self.env.rewards.items():
            rewards[a] = rewards.get(a, 0.0) + float(r)

    def _collect_ended(
        self, obs: ObsDict, terms: dict[str, bool], truncs: dict[str, bool], infos: InfoDict
    ) -> None:
        """Report (once) every still-present agent that has just ended, with final obs.

        Must run before the dead step that removes the agent from the env.
        """
        env = self.env
        for a in env.agents:
            if a not in self._reported and self._is_dead(a):
                self._reported.add(a)
                obs[a] = env.observe(a)
                terms[a] = bool(env.terminations.get(a, False))
                truncs[a] = bool(env.truncations.get(a, False))
                infos[a] = env.infos.get(a, {})

    def _collect_vanished(
        self,
        present: set[AgentID],
        obs: ObsDict,
        terms: dict[str, bool],
        truncs: dict[str, bool],
        infos: InfoDict,
    ) -> None:
        """Report agents the env removed without ever flagging them as ended.

        Such agents count as terminated; their final observation is included if
        the env can still produce it.
        """
        env = self.env
        for a in sorted(self._alive - present - self._reported, key=self._order):
            self._reported.add(a)
            try:
                obs[a] = env.observe(a)
            except Exception:  # the env forgot the agent; no final obs to give
                pass
            terms[a] = True
            truncs[a] = False
            infos[a] = {}

    def _order(self, agent: AgentID) -> int:
        try:
            return self.possible_agents.index(agent)
        except ValueError:
            return len(self.possible_agents)
