"""The internal multi-agent environment protocol.

Every environment the framework touches (PettingZoo parallel or AEC, Gymnasium,
or a hand-written one) is seen through :class:`MultiAgentEnv`, so that runners,
connectors and episodes deal with exactly one shape of data: dicts keyed by
agent id.  The observation dict names the agents that act next, which lets
simultaneous-move and turn-based games share a single code path.
"""

from __future__ import annotations

import abc
from typing import Any

import gymnasium
import numpy as np

AgentID = str
"""Agent ids are plain strings (``"agent_0"``, ``"player_1"``, ...)."""

ALL = "__all__"
"""Key in ``terminateds``/``truncateds`` that says the episode is over for everyone."""

ObsDict = dict[str, Any]
RewardDict = dict[str, float]
FlagDict = dict[str, bool]
InfoDict = dict[str, dict[str, Any]]
StepResult = tuple[ObsDict, RewardDict, FlagDict, FlagDict, InfoDict]


class EnvError(ValueError):
    """Raised for misuse of an environment or an environment that cannot be made.

    A ``ValueError`` subclass so callers validating user configuration can catch
    it together with other bad-value errors.
    """


class MultiAgentEnv(abc.ABC):
    """Abstract multi-agent environment with dict-keyed observations and actions.

    Contract (all dicts are keyed by agent id):

    * ``reset(seed)`` returns ``(obs, infos)``; ``obs`` holds exactly the agents
      that must act first.
    * ``step(actions)`` takes an action for exactly the agents of the previous
      ``obs`` that are still alive, and returns
      ``(obs, rewards, terminateds, truncateds, infos)`` where

      - ``obs`` holds every agent that must act next plus the final observation
        of every agent that ended (terminated or truncated) at this step;
      - ``rewards`` holds the reward each agent received during the call
        (acting or not; agents without reward may be absent; Python floats);
      - ``terminateds``/``truncateds`` are ``True`` for each agent that ended at
        this step (live agents may appear with ``False``) and both carry the
        key ``"__all__"``, which is ``True`` in *both* dicts once the episode is
        over for everyone.  An agent is never reported as ended twice.
    * ``state()`` returns the global state where the env has one, else ``None``.
    * ``metadata`` has at least ``{"name": str, "turn_based": bool}``.
    """

    possible_agents: list[AgentID]
    metadata: dict[str, Any]

    @abc.abstractmethod
    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        """Observation space of ``agent``."""

    @abc.abstractmethod
    def action_space(self, agent: AgentID) -> gymnasium.Space:
        """Action space of ``agent``."""

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        """Start a new episode; return the first actors' observations and infos."""

    @abc.abstractmethod
    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        """Apply ``actions`` and advance until some agent must act again."""

    def state(self) -> np.ndarray | None:
        """Global state for centralised critics; ``None`` when unavailable."""
        return None

    def np_random_source(self) -> np.random.Generator | np.random.RandomState | None:
        """The NumPy generator the env draws its randomness from, or ``None``.

        Runners save its state before an unseeded reset, so that the episode can
        be replayed from a checkpoint (reset, restore the state, reset again,
        re-step the recorded actions). An env without one is reset with a fresh
        seed every episode instead, which costs a little more.
        """
        rng = getattr(self, "np_random", None)
        return rng if isinstance(rng, (np.random.Generator, np.random.RandomState)) else None

    def close(self) -> None:
        """Release resources held by the environment."""

    def __enter__(self) -> MultiAgentEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        name = getattr(self, "metadata", {}).get("name", "?")
        return f"{type(self).__name__}<{name}>"


def env_name(env: Any) -> str:
    """Best-effort human-readable name of a third-party env, for metadata and errors."""
    meta = getattr(env, "metadata", None)
    if isinstance(meta, dict) and isinstance(meta.get("name"), str):
        return meta["name"]
    spec = getattr(env, "spec", None)
    if getattr(spec, "id", None):
        return str(spec.id)
    unwrapped = getattr(env, "unwrapped", env)
    return type(unwrapped).__name__
