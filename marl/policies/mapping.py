"""Policy specs and the agent -> policy mapping.

A scenario declares policies (id -> spec) and a mapping from agent ids to
policy ids: a Python callable `(agent_id, episode) -> policy_id` or, in YAML, an
ordered table of glob patterns (`"adversary_*": predator`, first match wins).
Spaces are inferred from the agents mapped to each policy, so a spec usually
names only the module and its options.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import gymnasium as gym

from marl.errors import ConfigError, unknown_key

DEFAULT_POLICY_ID = "default_policy"
SPEC_KEYS = frozenset({"module_class", "model", "observation_space", "action_space", "spaces_from"})  # a PolicySpec's


class MappingError(ConfigError):
    """A policy or mapping declaration that cannot work (a config error: its key's origin is named, exit 2)."""


@dataclass
class PolicySpec:
    """What a policy is: its module and options; spaces are filled in from its agents."""

    module_class: str | type | None = None  # import path "pkg.mod:Class" or a class; None: default MLP
    model: dict = field(default_factory=dict)  # options passed to the module (hiddens, activation, ...)
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None
    spaces_from: str | None = None  # no agents of its own (e.g. a frozen self-play snapshot): this policy's spaces

    @staticmethod
    def from_any(policy_id: str, value: Any) -> "PolicySpec":
        if value is None:
            return PolicySpec()
        if isinstance(value, PolicySpec):
            return value
        if isinstance(value, Mapping):
            for key in value:
                if key not in SPEC_KEYS:
                    raise unknown_key(f"multi_agent.policies.{policy_id}.{key}", SPEC_KEYS, "a policy spec holds", MappingError)
            model = value.get("model") or {}
            if not isinstance(model, Mapping):
                raise MappingError(
                    f"multi_agent.policies.{policy_id}.model must be a mapping of options, got {type(model).__name__}"
                )
            return PolicySpec(**{**value, "model": dict(model)})
        raise MappingError(
            f"multi_agent.policies.{policy_id}: expected a PolicySpec, a mapping or null, got {type(value).__name__}"
        )


class PolicyMapping:
    """agent id -> policy id, from a callable or an ordered glob-pattern table."""

    def __init__(self, mapping: Callable[[str, Any], str] | Mapping[str, str] | None, policy_ids: list[str]):
        self.policy_ids = list(policy_ids)
        if mapping is None:
            if len(self.policy_ids) == 1:
                only = self.policy_ids[0]
                self._fn: Callable[[str, Any], str] = lambda agent_id, episode: only
            else:
                # Several policies and no mapping: agents map to the policy of the same name.
                self._fn = self._by_name
            self.description = "all agents -> " + self.policy_ids[0] if len(self.policy_ids) == 1 else "by name"
        elif callable(mapping):
            self._fn = mapping
            self.description = getattr(mapping, "__name__", "callable")
        elif isinstance(mapping, Mapping):
            self._patterns = [(str(p), str(pid)) for p, pid in mapping.items()]
            self._fn = self._by_pattern
            self.description = ", ".join(f"{p}: {pid}" for p, pid in self._patterns)
        else:
            raise MappingError(
                "multi_agent.policy_mapping must be a callable (agent_id, episode) -> policy_id "
                f"or a table of glob patterns, got {type(mapping).__name__}"
            )

    def _by_name(self, agent_id: str, episode: Any) -> str:
        if agent_id in self.policy_ids:
            return agent_id
        raise MappingError(
            f"agent '{agent_id}' has no policy: several policies {self.policy_ids} are declared and no "
            "multi_agent.policy_mapping says which one it uses"
        )

    def _by_pattern(self, agent_id: str, episode: Any) -> str:
        for pattern, pid in self._patterns:
            if fnmatch.fnmatchcase(agent_id, pattern):
                return pid
        raise MappingError(
            f"agent '{agent_id}' matches no pattern of multi_agent.policy_mapping "
            f"({[p for p, _ in self._patterns]}); add one, e.g. '\"*\": {self.policy_ids[0]}'"
        )

    def set_state(self, state) -> None:
        """Hands state to a stateful mapping (a league's matchmaking table); other mappings take none."""
        if not hasattr(self._fn, "set_state"):
            raise MappingError(f"policy mapping {self.description!r} keeps no state, but was given some")
        self._fn.set_state(state)

    def __call__(self, agent_id: str, episode: Any = None) -> str:
        pid = self._fn(agent_id, episode)
        if pid not in self.policy_ids:
            raise MappingError(
                f"agent '{agent_id}' is mapped to unknown policy '{pid}'; declared policies: {self.policy_ids}"
            )
        return pid


def resolve_policies(
    env, specs: Mapping[str, PolicySpec], mapping: PolicyMapping
) -> tuple[dict[str, PolicySpec], dict[str, list[str]]]:
    """Fills each spec's spaces from the agents mapped to it.

    Returns (specs with spaces, policy id -> agent ids). Fails if agents with
    different spaces share a policy, or a declared policy gets no agent and
    names no spaces.
    """
    agents_of: dict[str, list[str]] = {pid: [] for pid in specs}
    for agent in env.possible_agents:
        agents_of[mapping(agent, None)].append(agent)
    resolved: dict[str, PolicySpec] = {}
    for pid, spec in specs.items():
        agents = agents_of[pid]
        obs_space, act_space = spec.observation_space, spec.action_space
        for agent in agents:
            a_obs, a_act = env.observation_space(agent), env.action_space(agent)
            if obs_space is None:
                obs_space = a_obs
            elif a_obs != obs_space:
                raise MappingError(
                    f"policy '{pid}' is shared by agents with different observation spaces: "
                    f"'{agent}' has {a_obs}, but {agents[0] if agents[0] != agent else 'the spec'} has {obs_space}; "
                    "map them to different policies"
                )
            if act_space is None:
                act_space = a_act
            elif a_act != act_space:
                raise MappingError(
                    f"policy '{pid}' is shared by agents with different action spaces: "
                    f"'{agent}' has {a_act}, but {agents[0] if agents[0] != agent else 'the spec'} has {act_space}; "
                    "map them to different policies"
                )
        source = spec.spaces_from
        if source is not None and not agents:
            if source not in specs or not agents_of[source]:
                raise MappingError(f"policy '{pid}' takes its spaces from '{source}', which is not a declared policy with agents")
            first = agents_of[source][0]
            obs_space = obs_space or env.observation_space(first)
            act_space = act_space or env.action_space(first)
        if obs_space is None or act_space is None:
            raise MappingError(
                f"policy '{pid}' has no agents mapped to it (agents: {list(env.possible_agents)}, "
                f"mapping: {mapping.description}); remove it or give it observation_space and action_space"
            )
        resolved[pid] = PolicySpec(spec.module_class, dict(spec.model), obs_space, act_space, spec.spaces_from)
    return resolved, agents_of
