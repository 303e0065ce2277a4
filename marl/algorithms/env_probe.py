"""What a config's build decides from the env itself, asked of one fresh env: `EnvFacts`.

PPO's `auto` training keys depend on the action spaces (Box or not) and on whether the policies observe
images; `environment.wrappers: auto` on whether the env's own observations are large frames
(`marl.envs.wrappers.image_wrappers`). One probe answers all three, once per config (the answer travels
with the config to runner and learner processes).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from marl.envs import make_env
from marl.envs.batched_families import make_batched_env, natively_batched
from marl.envs.registry import auto_wrappers_of
from marl.envs.wrappers import is_auto
from marl.modules.catalog import is_image


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
