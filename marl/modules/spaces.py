"""How observations of a space become the flat float vectors modules read.

Kept beside the modules so a module can size its input layer from the space
alone; the env->module connector applies the same rule to the data.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


def is_masked_space(space: gym.Space) -> bool:
    """A Dict with `observation` and `action_mask`: PettingZoo's convention for legal moves."""
    return isinstance(space, gym.spaces.Dict) and "observation" in space.spaces and "action_mask" in space.spaces


def observation_part(space: gym.Space) -> gym.Space:
    return space["observation"] if is_masked_space(space) else space


def image_layout(shape: tuple) -> str:
    """'CHW' when the first axis is smaller than both others (e.g. (4, 84, 84)), else 'HWC'
    (gymnasium's and PettingZoo's convention, e.g. (84, 84, 3) or a (13, 13, 5) grid map)."""
    return "CHW" if shape[0] < shape[1] and shape[0] < shape[2] else "HWC"


def image_space(space: gym.Space) -> gym.spaces.Box | None:
    """The observation part when it is an image (a Box with 3 axes, (H, W, C) or (C, H, W)), else None."""
    obs = observation_part(space)
    return obs if isinstance(obs, gym.spaces.Box) and len(obs.shape) == 3 else None


def flat_obs_dim(space: gym.Space) -> int:
    """Width of the flattened observation fed to the module (action mask excluded)."""
    return int(gym.spaces.flatdim(observation_part(space)))


def action_input_dim(space: gym.Space) -> int:
    """Width of the action-distribution inputs a module must produce for this action space."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, gym.spaces.Box):
        return 2 * int(np.prod(space.shape))
    raise TypeError(f"unsupported action space {space}; supported: Discrete, MultiDiscrete, Box")
