"""What a config's build decides from the env itself, asked of one fresh env: `EnvFacts`.

PPO's `auto` training keys depend on the action spaces (Box or not) and on whether the policies observe
images; `environment.wrappers: auto` on whether the env's own observations are large frames
(`marl.envs.wrappers.image_wrappers`). One probe answers all three, once per config (the answer travels
with the config to runner and learner processes).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gymnasium as gym

from marl.envs import make_env
from marl.envs.action_kinds import action_kind_key
from marl.envs.batched_families import make_batched_env, natively_batched
from marl.envs.registry import auto_wrappers_of
from marl.envs.wrappers import is_auto
from marl.modules.catalog import is_image

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvFacts:
    acts_in_box: bool  # every agent acts in a Box space
    observes_images: bool  # an agent observes images, once the wrappers below are applied
    wrappers: list  # the SuperSuit wrappers the env is made with (`auto` resolved)


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
    finally:
        env.close()  # (both forms: a vector env's worker processes end here)
    return EnvFacts(acts_in_box=box, observes_images=images, wrappers=wrappers)


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
