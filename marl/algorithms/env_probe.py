"""What a config's build decides from the env itself, asked of one fresh env: `EnvFacts`.

PPO's `auto` training keys depend on the action spaces (Box or not) and on whether the policies observe
images; `environment.wrappers: auto` on whether the env's own observations are large frames
(`marl.envs.wrappers.image_wrappers`). One probe answers all three, once per config (the answer travels
with the config to runner and learner processes).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import gymnasium as gym

from marl.envs import make_env
from marl.envs.action_kinds import action_kind_key
from marl.envs.batched_families import make_batched_env, natively_batched
from marl.envs.registry import auto_wrappers_of
from marl.envs.wrappers import is_auto
from marl.modules.catalog import is_image
from marl.policies.groups import agent_groups, group_mapping

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvFacts:
    acts_in_box: bool  # every agent acts in a Box space
    observes_images: bool  # an agent observes images, once the wrappers below are applied
    wrappers: list  # the SuperSuit wrappers the env is made with (`auto` resolved)
    agent_groups: dict | None = None  # group -> agents where the agents' spaces differ (marl.policies.groups)


def probe_env(config) -> EnvFacts:
    """The env's facts under `config`'s environment and env_runners sections."""
    env_cfg = config.environment_cfg
    if natively_batched(env_cfg.env):  # (a name only register_batched_env knows has no dict form to ask)
        worlds = config.env_runners_cfg.num_envs_per_env_runner  # (what its runners make: the same checks)
        env = make_batched_env(env_cfg.env, dict(env_cfg.env_config), worlds, None, "cpu")
        agents, wrappers = env.agents, []
    elif is_auto(env_cfg.wrappers):  # one env made bare answers what auto wraps; remade only where it wraps
        env = make_env(env_cfg.env, dict(env_cfg.env_config), [])
        wrappers = auto_wrappers_of(env)
        if wrappers:
            env.close()
            env = make_env(env_cfg.env, dict(env_cfg.env_config), wrappers)
        agents = env.possible_agents
    else:
        wrappers = list(env_cfg.wrappers)
        env = make_env(env_cfg.env, dict(env_cfg.env_config), wrappers)
        agents = env.possible_agents
    try:
        box = all(isinstance(env.action_space(a), gym.spaces.Box) for a in agents)
        images = any(is_image(env.observation_space(a)) for a in agents)
        groups = agent_groups(list(agents), lambda a: (env.observation_space(a), env.action_space(a)))
    finally:
        env.close()  # (both forms: a vector env's worker processes end here)
    return EnvFacts(acts_in_box=box, observes_images=images, wrappers=wrappers, agent_groups=groups)


def resolve_env_choices(config) -> None:
    """Sets, in place on the copy `AlgorithmConfig.resolved` builds from, what the build decides from the env, so
    that config.yaml names it: the wrappers `auto` picks, the action kind of an env made with either
    (`action_kind_choice`), and the policies `default_groups` gives where agents differ."""
    env_cfg, ma = config.environment_cfg, config.multi_agent_cfg
    if is_auto(env_cfg.wrappers):
        env_cfg.wrappers = [] if natively_batched(env_cfg.env) else copy.deepcopy(config.env_facts().wrappers)
    if (choice := action_kind_choice(config)) is not None:
        env_cfg.env_config = {**env_cfg.env_config, choice[0]: choice[1]}
        config._env_facts = None  # (asked again of the env as it now is)
    groups = default_groups(config)
    if groups:
        ma.policies, ma.policy_mapping = {name: {} for name in groups}, group_mapping(groups)
        log.info("%s: agents differ in their spaces: one policy per group, %s (multi_agent.policies)", env_cfg.env, groups)


def default_groups(config) -> dict | None:
    """The policies `AlgorithmConfig.policy_specs` defaults to where none, no policy_mapping and no self-play pool
    or league are declared: one per group of alike agents where the env's agents differ (`marl.policies.groups`,
    asked of the cached probe), else None (one 'default_policy' for every agent)."""
    ma = config.multi_agent_cfg
    if ma.policies or ma.policy_mapping is not None or not config.environment_cfg.env or config.seated_pool() is not None:
        return None
    return config.env_facts().agent_groups


def action_kind_choice(config) -> tuple[str, object] | None:
    """(env_config key, value) that makes the env act in the kind the algorithm acts in, where the env offers both
    kinds (`marl.envs.action_kinds`), the user left that key out and the env as configured acts in the other one;
    else None. Asked by `AlgorithmConfig.resolved`, which records the value in the built config (config.yaml)."""
    env_cfg = config.environment_cfg
    option = action_kind_key(env_cfg.env)
    if option is None or option.key in env_cfg.env_config:
        return None
    kinds = type(config).capabilities.action_spaces
    have = "Box" if config.env_facts().acts_in_box else "Discrete"
    if have in kinds:
        return None
    want = "Discrete" if have == "Box" else "Box"
    if want not in kinds:
        return None  # (neither kind: the action-space check names the algorithms that act in this one)
    log.info("%s: %s acts in %s actions: environment.env_config.%s set to %r (set it to override)",
             env_cfg.env, config.algo_name, want, option.key, option.value(want))
    return option.key, option.value(want)
