"""The env spec: what a config's build and every algorithm learn of the env, asked of ONE env made once (`EnvSpec`).

Agents, their spaces, whether the game is turn-based, which agents observe action masks, the global state's
spec (`probe_global_state`), the groups of alike agents, and the wrappers `environment.wrappers: auto` picks.
`AlgorithmConfig.env_spec()` resolves it once per env (name, env_config, wrappers) and keeps it on the config,
which ships it to runner and learner processes; the runtime (`Algorithm`), the algorithms' plans (`_plan`: CQL's
Box-or-Discrete, the mixers' agent indices, MAPPO's state size) and the offline writer read it. Runners make
their own envs to sample; nothing else makes one to learn a fact.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from marl.envs import make_env
from marl.envs.action_kinds import action_kind_key
from marl.envs.batched_families import make_batched_env, natively_batched
from marl.envs.batched_view import dict_observation_space
from marl.envs.registry import auto_wrappers_of
from marl.envs.wrappers import is_auto
from marl.modules.catalog import is_image
from marl.modules.spaces import is_masked_space
from marl.policies.groups import agent_groups, group_mapping
from marl.runners.global_state import ENV_STATE, probe_global_state

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvSpec:
    """One env's facts; `observation_space(agent)`, `action_space(agent)` and `possible_agents` as the env's, so
    `resolve_policies(spec, ...)` maps agents to policies without an env."""

    possible_agents: tuple[str, ...]
    observation_spaces: dict  # agent -> its observation space (a masked Dict where it observes action masks)
    action_spaces: dict  # agent -> its action space
    turn_based: bool
    global_state: dict  # {source, dim, num_agents, dtype[, frame]}: what a centralised critic reads
    wrappers: list  # the SuperSuit wrappers the env is made with (`auto` resolved)
    agent_groups: dict | None  # group -> agents where the agents' spaces differ (marl.policies.groups)
    made_from: tuple  # (env name, its env_config): what `fits` compares

    def fits(self, env_cfg) -> bool:
        """Whether this is the spec of the env `env_cfg` (an environment section) makes."""
        return self.made_from == _made_from(env_cfg) and (is_auto(env_cfg.wrappers) or list(env_cfg.wrappers) == self.wrappers)

    def observation_space(self, agent: str) -> gym.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self.action_spaces[agent]

    @property
    def acts_in_box(self) -> bool:
        """Every agent acts in a Box space."""
        return all(isinstance(s, gym.spaces.Box) for s in self.action_spaces.values())

    @property
    def observes_images(self) -> bool:
        """An agent observes images, once the wrappers are applied."""
        return any(is_image(s) for s in self.observation_spaces.values())

    @property
    def masked_agents(self) -> frozenset[str]:
        """The agents whose observations carry action masks (PettingZoo's masked Dict)."""
        return frozenset(a for a, s in self.observation_spaces.items() if is_masked_space(s))


def resolve_env_spec(config) -> EnvSpec:
    """The env's spec under `config`'s environment section, from one env (two where `wrappers: auto` wraps it: the
    bare env says what auto wraps with); reset once, for the global state."""
    env_cfg = config.environment_cfg
    if natively_batched(env_cfg.env):  # (a name only register_batched_env knows has no dict form to ask)
        return _batched_spec(config)
    if is_auto(env_cfg.wrappers):
        wrappers = None
    else:
        wrappers = list(env_cfg.wrappers)
    env = make_env(env_cfg.env, dict(env_cfg.env_config), wrappers or [])
    try:
        if wrappers is None:
            wrappers = auto_wrappers_of(env)
            if wrappers:
                env.close()
                env = make_env(env_cfg.env, dict(env_cfg.env_config), wrappers)
        agents = tuple(env.possible_agents)
        obs = {a: env.observation_space(a) for a in agents}
        act = {a: env.action_space(a) for a in agents}
        return EnvSpec(possible_agents=agents, observation_spaces=obs, action_spaces=act,
                       turn_based=bool(env.metadata.get("turn_based")), global_state=probe_global_state(env),
                       wrappers=wrappers, agent_groups=agent_groups(list(agents), lambda a: (obs[a], act[a])),
                       made_from=_made_from(env_cfg))
    finally:
        env.close()


def _batched_spec(config) -> EnvSpec:
    """A natively batched env's spec, asked of the env its runners make (as many worlds: the same checks), its spaces
    as the dict API presents them (`marl.envs.batched_view`: what the learners' modules are built for)."""
    env_cfg = config.environment_cfg
    worlds = config.env_runners_cfg.num_envs_per_env_runner
    env = make_batched_env(env_cfg.env, dict(env_cfg.env_config), worlds, None, "cpu")
    try:
        agents, masked = tuple(env.agents), env.action_masks() is not None
        obs = {a: dict_observation_space(env, a, masked) for a in agents}
        act = {a: env.action_space(a) for a in agents}
        state = env.state(env.reset(seed=0))[0].cpu().numpy()  # (the state of world 0, as its dict form gives it)
        global_state = {"source": ENV_STATE, "dim": int(state.size), "num_agents": len(agents),
                        "dtype": "uint8" if state.dtype == np.uint8 else "float32"}
        return EnvSpec(possible_agents=agents, observation_spaces=obs, action_spaces=act, turn_based=False,
                       global_state=global_state, wrappers=[], made_from=_made_from(env_cfg),
                       agent_groups=agent_groups(list(agents), lambda a: (obs[a], act[a])))
    finally:
        env.close()  # (a vector env's worker processes end here)


def _made_from(env_cfg) -> tuple:
    return env_cfg.env, repr(sorted(dict(env_cfg.env_config).items()))


def resolve_env_choices(config) -> None:
    """Sets, in place on the copy `AlgorithmConfig.resolved` builds from, what the build decides from the env, so
    that config.yaml names it: the wrappers `auto` picks, the action kind of an env made with either
    (`action_kind_choice`), and the policies `default_groups` gives where agents differ."""
    env_cfg, ma = config.environment_cfg, config.multi_agent_cfg
    if is_auto(env_cfg.wrappers):
        env_cfg.wrappers = [] if natively_batched(env_cfg.env) else copy.deepcopy(config.env_spec().wrappers)
    if (choice := action_kind_choice(config)) is not None:
        env_cfg.env_config = {**env_cfg.env_config, choice[0]: choice[1]}
        config._env_spec = None  # (asked again of the env as it now is)
    groups = default_groups(config)
    if groups:
        ma.policies, ma.policy_mapping = {name: {} for name in groups}, group_mapping(groups)
        log.info("%s: agents differ in their spaces: one policy per group, %s (multi_agent.policies)", env_cfg.env, groups)


def default_groups(config) -> dict | None:
    """The policies `AlgorithmConfig.policy_specs` defaults to where none, no policy_mapping and no self-play pool
    or league are declared: one per group of alike agents where the env's agents differ (`marl.policies.groups`,
    asked of the env spec), else None (one 'default_policy' for every agent)."""
    ma = config.multi_agent_cfg
    if ma.policies or ma.policy_mapping is not None or not config.environment_cfg.env or config.seated_pool() is not None:
        return None
    return config.env_spec().agent_groups


def action_kind_choice(config) -> tuple[str, object] | None:
    """(env_config key, value) that makes the env act in the kind the algorithm acts in, where the env offers both
    kinds (`marl.envs.action_kinds`), the user left that key out and the env as configured acts in the other one;
    else None. Asked by `AlgorithmConfig.resolved`, which records the value in the built config (config.yaml)."""
    env_cfg = config.environment_cfg
    option = action_kind_key(env_cfg.env)
    if option is None or option.key in env_cfg.env_config:
        return None
    kinds = type(config).capabilities.action_spaces
    have = "Box" if config.env_spec().acts_in_box else "Discrete"
    if have in kinds:
        return None
    want = "Discrete" if have == "Box" else "Box"
    if want not in kinds:
        return None  # (neither kind: the action-space check names the algorithms that act in this one)
    log.info("%s: %s acts in %s actions: environment.env_config.%s set to %r (set it to override)",
             env_cfg.env, config.algo_name, want, option.key, option.value(want))
    return option.key, option.value(want)
