"""The first step of every env->module pipeline: raw observations -> flat float32 rows (or image arrays), and the
space helpers the pieces after it use (`flat_box`, `with_observation`, `image_dtype`).

Its own module because it is the one step every policy runs, whatever pieces it configures, and it holds the
rule for what an observation travels as (flat float32, uint8 frames, packed parts); the pieces and the
pipeline (`marl.connectors.env_to_module`) build on it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from marl.modules.parts import PartsLayout, has_image_parts
from marl.modules.spaces import as_image_box, flat_obs_dim, image_space, is_masked_space, observation_part


def flat_box(space: gym.Space) -> gym.spaces.Box:
    """The flat float32 Box of a space's observation part (what pieces after `Flatten` see)."""
    box = gym.spaces.flatten_space(observation_part(space))
    return gym.spaces.Box(box.low.astype(np.float32), box.high.astype(np.float32), box.shape, np.float32)


def with_observation(space: gym.Space, box: gym.spaces.Box) -> gym.Space:
    """`space` with its observation part replaced by `box` (an action mask stays beside it)."""
    if is_masked_space(space):
        return gym.spaces.Dict({"observation": box, "action_mask": space["action_mask"]})
    return box


def image_dtype(box: gym.spaces.Box):
    """What an image observation travels as: uint8 stays uint8, anything else float32."""
    return np.uint8 if box.dtype == np.uint8 else np.float32


class Flatten:
    """The first step of every env->module pipeline: raw observations -> (float32 [m, d], action mask or None).

    Its space is the env's own: modules flatten a space by the same rule (`marl.modules.spaces`).
    `keep_images`: image observations come out as [m, *shape] in `image_dtype` instead.
    """

    def __init__(self, space: gym.Space, keep_images: bool = False):
        self.space = space
        self.masked = is_masked_space(space)
        self.obs_space = observation_part(space)
        self.dim = flat_obs_dim(space)
        image = image_space(space) if keep_images else None
        self.image = None if image is None else as_image_box(image)
        # Dict/Tuple observations with image parts: one packed uint8 row each (marl.modules.parts)
        self.parts = PartsLayout(self.obs_space) if keep_images and has_image_parts(self.obs_space) else None
        if self.parts is not None:
            self._flatten = self.parts.pack
        elif self.image is not None:
            self._dtype = image_dtype(self.image)
            self._flatten = self._stack_images
        elif isinstance(self.obs_space, gym.spaces.Box):
            self._flatten = self._flatten_box
        elif isinstance(self.obs_space, gym.spaces.Discrete):
            self._flatten = self._flatten_discrete
        else:
            self._flatten = self._flatten_generic

    def _flatten_box(self, items: list) -> np.ndarray:
        return np.asarray(items, dtype=np.float32).reshape(len(items), self.dim)

    def _stack_images(self, items: list) -> np.ndarray:
        return np.asarray(items, dtype=self._dtype).reshape((len(items),) + self.image.shape)

    def _flatten_discrete(self, items: list) -> np.ndarray:
        out = np.zeros((len(items), self.dim), np.float32)
        out[np.arange(len(items)), np.asarray(items, dtype=np.int64) - self.obs_space.start] = 1.0
        return out

    def _flatten_generic(self, items: list) -> np.ndarray:
        return np.stack([gym.spaces.flatten(self.obs_space, o) for o in items]).astype(np.float32)

    def __call__(self, raw: list) -> tuple[np.ndarray, np.ndarray | None]:
        if self.masked:
            mask = np.asarray([o["action_mask"] for o in raw], dtype=np.float32)
            return self._flatten([o["observation"] for o in raw]), mask
        return self._flatten(raw), None
