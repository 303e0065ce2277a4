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


def image_shape(box: gym.Space) -> tuple | None:
    """The image shape of a Box that is an image: 3 axes, (H, W, C) or (C, H, W), of uint8 pixels or
    float feature maps (MAgent2); or a uint8 Box of 2 axes (a grey frame, e.g. after SuperSuit's
    color_reduction), seen as (H, W, 1). Else None: integer-coded boards (Connect Four's int8
    planes) travel as flat float32 vectors, read by a conv stack only where `model.conv_filters` says so
    (`marl.modules.catalog.reads_with_conv`)."""
    if not isinstance(box, gym.spaces.Box):
        return None
    if len(box.shape) == 3 and (box.dtype == np.uint8 or np.issubdtype(box.dtype, np.floating)):
        return tuple(int(n) for n in box.shape)
    if len(box.shape) == 2 and box.dtype == np.uint8:
        return tuple(int(n) for n in box.shape) + (1,)
    return None


def as_image_box(box: gym.spaces.Box) -> gym.spaces.Box:
    """`box` with its image shape (a grey frame gains its channel axis)."""
    shape = image_shape(box)
    if shape is None or shape == tuple(box.shape):  # (None: a board of 3 axes read by a conv stack, as it is)
        return box
    return gym.spaces.Box(box.low.reshape(shape), box.high.reshape(shape), shape, box.dtype)


def image_space(space: gym.Space) -> gym.spaces.Box | None:
    """The observation part when it is an image (see `image_shape`), else None."""
    obs = observation_part(space)
    return obs if image_shape(obs) is not None else None


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
