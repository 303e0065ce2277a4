"""Dict/Tuple observations with image parts, kept compact: one uint8 byte row per observation.

Flattening such an observation to float32 would store every pixel in 4 bytes. Instead the
env->module pipeline packs each observation into one row of bytes (`PartsLayout.pack`), which
runners, batches, replay and the object store carry like any uint8 array:

* first the parts that are float32 values, as their float32 bytes: flat parts (Box, Discrete
  one-hot, MultiBinary, ... flattened by gymnasium's rule, part by part) and float images;
* then the uint8 image parts, their pixels as they are.

The module's `PartsEncoder` (`marl.modules.catalog`) unpacks a row (`PartsLayout.unpack`) and
encodes each part (conv for images, the flat vector for the rest), in the space's part order.
Parts are the leaves of the space: a nested Dict/Tuple that holds an image is opened too; one
without an image is one flat part.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from marl.modules.spaces import as_image_box, image_shape


def _children(space) -> list[tuple]:
    if isinstance(space, gym.spaces.Dict):
        return list(space.spaces.items())
    return list(enumerate(space.spaces))


def has_image_parts(space: gym.Space) -> bool:
    """A Dict/Tuple space with an image among its leaves (what `PartsLayout` packs)."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return any(image_shape(s) is not None or has_image_parts(s) for _, s in _children(space))
    return False


class PartsLayout:
    """Where each leaf of a Dict/Tuple observation lies in its packed byte row."""

    def __init__(self, space: gym.spaces.Dict | gym.spaces.Tuple):
        self.leaves: list[tuple[tuple, gym.Space, bool]] = []  # (path, space, is an image), in part order
        self._walk(space, ())
        sizes = []
        for _, leaf, image in self.leaves:
            if image:
                box = as_image_box(leaf)
                sizes.append((int(np.prod(box.shape)), box.dtype == np.uint8, tuple(box.shape)))
            else:
                sizes.append((int(gym.spaces.flatdim(leaf)), False, None))
        # float32 parts first (their bytes stay 4-aligned for a view), then the uint8 pixels
        self.float_width = sum(n for n, is_u8, _ in sizes if not is_u8)  # float32 values
        self.offsets, self.shapes, self.uint8 = [], [], []
        floats, bytes_ = 0, 4 * self.float_width
        for n, is_u8, shape in sizes:
            if is_u8:
                self.offsets.append(bytes_)
                bytes_ += n
            else:
                self.offsets.append(floats)  # in float32 values from the row's start
                floats += n
            self.uint8.append(is_u8)
            self.shapes.append(shape)
        self.widths = [n for n, _, _ in sizes]
        self.nbytes = bytes_

    def _walk(self, space, path: tuple) -> None:
        for key, child in _children(space):
            if image_shape(child) is not None:
                self.leaves.append((path + (key,), child, True))
            elif has_image_parts(child):
                self._walk(child, path + (key,))
            else:
                self.leaves.append((path + (key,), child, False))

    # -- runners: raw observations -> byte rows ---------------------------------------------
    @staticmethod
    def _get(obs, path):
        for key in path:
            obs = obs[key]
        return obs

    def _flat_values(self, leaf: gym.Space, values: list) -> np.ndarray:
        if isinstance(leaf, gym.spaces.Box):
            return np.asarray(values, dtype=np.float32).reshape(len(values), -1)
        if isinstance(leaf, gym.spaces.Discrete):
            out = np.zeros((len(values), int(leaf.n)), np.float32)
            out[np.arange(len(values)), np.asarray(values, dtype=np.int64) - leaf.start] = 1.0
            return out
        return np.stack([gym.spaces.flatten(leaf, v) for v in values]).astype(np.float32).reshape(len(values), -1)

    def pack(self, items: list) -> np.ndarray:
        """Raw observations -> uint8 [m, nbytes]."""
        m = len(items)
        out = np.empty((m, self.nbytes), np.uint8)
        floats = out[:, : 4 * self.float_width].view(np.float32) if self.float_width else None
        for (path, leaf, image), offset, width, is_u8 in zip(self.leaves, self.offsets, self.widths, self.uint8):
            values = [self._get(o, path) for o in items]
            if is_u8:
                out[:, offset : offset + width] = np.asarray(values, dtype=np.uint8).reshape(m, width)
            elif image:
                floats[:, offset : offset + width] = np.asarray(values, dtype=np.float32).reshape(m, width)
            else:
                floats[:, offset : offset + width] = self._flat_values(leaf, values)
        return out

    # -- modules: byte rows -> one tensor per part ----------------------------------------------
    def unpack(self, rows: torch.Tensor) -> list[torch.Tensor]:
        """uint8 [B, nbytes] -> each part in part order: images [B, *shape] (uint8 stays uint8), flat parts [B, d]."""
        b = rows.shape[0]
        floats = rows[:, : 4 * self.float_width].contiguous().view(torch.float32) if self.float_width else None
        parts = []
        for offset, width, is_u8, shape in zip(self.offsets, self.widths, self.uint8, self.shapes):
            if is_u8:
                parts.append(rows[:, offset : offset + width].reshape((b,) + shape))
            else:
                part = floats[:, offset : offset + width]
                parts.append(part.reshape((b,) + shape) if shape is not None else part)
        return parts

    def to_float(self, rows: torch.Tensor) -> torch.Tensor:
        """uint8 [B, nbytes] -> float [B, flat dim] in part order, uint8 pixels scaled to [0, 1] (e.g. a mixer's state)."""
        parts = self.unpack(rows)
        return torch.cat([p.reshape(len(p), -1).float() / 255.0 if u8 else p.reshape(len(p), -1)
                          for p, u8 in zip(parts, self.uint8)], dim=1)
