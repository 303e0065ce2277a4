"""module -> env: the module's sampled actions of one policy's rows -> per-agent env actions.

Pieces (`ClipActions`, `UnsquashActions`, a user's own) work on the module's action array;
`ModuleToEnvPipeline` runs them and ends with the conversion to env actions (`ActionAdapter`). The batch keeps the module's own sample, so log-probs stay exact.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from marl.connectors.piece import ConnectorPiece, RowContext


class ActionAdapter:
    """The module's actions -> env actions: Discrete -> Python ints; MultiDiscrete -> int rows; Box -> float
    rows of the space's shape and dtype. Clipping and unsquashing are pieces before it (`ClipActions`,
    `UnsquashActions`); the batch keeps the module's own sample, so log-probs stay exact.
    """

    def __init__(self, space: gym.Space):
        self.space = space
        if isinstance(space, gym.spaces.Discrete):
            self.dtype, self.shape = np.int64, ()
            self._convert = self._discrete
        elif isinstance(space, gym.spaces.MultiDiscrete):
            self.dtype, self.shape = np.int64, tuple(space.shape)
            self._convert = self._multi_discrete
        elif isinstance(space, gym.spaces.Box):
            self.dtype, self.shape = np.float32, tuple(space.shape)
            self._convert = self._box
        else:
            raise TypeError(f"unsupported action space {space}; supported: Discrete, MultiDiscrete, Box")

    def _discrete(self, actions: np.ndarray) -> list:
        start = int(self.space.start)
        return actions.tolist() if start == 0 else (actions + start).tolist()

    def _multi_discrete(self, actions: np.ndarray) -> list:
        return list(actions.reshape((len(actions),) + self.shape) + self.space.start)

    def _box(self, actions: np.ndarray) -> list:
        a = actions.reshape((len(actions),) + self.shape)
        return list(a.astype(self.space.dtype, copy=False))

    def __call__(self, actions: np.ndarray) -> list:
        return self._convert(actions)


def unsquash(a, low, high):
    """[-1, 1] -> [low, high] (values outside [-1, 1] clipped first): NumPy arrays, or torch tensors with tensor bounds."""
    return low + (a.clip(-1.0, 1.0) + 1.0) * 0.5 * (high - low)


class _BoxBounds(ConnectorPiece):
    """Base of the Box action pieces: the bounds come from the action space (other spaces pass through). A piece is
    one function, `with_bounds`, of arrays of any library that clip and add: the dict path applies it to NumPy rows
    (`__call__`), the batched path to torch tensors (`on_tensors`), the compiled rollout to JAX arrays."""

    def __init__(self):
        self._bounds = None

    def __call__(self, actions, ctx):
        if self._bounds is None:
            return actions
        shape, low, high = self._bounds
        return self.with_bounds(low, high)(actions.reshape((len(actions),) + shape))

    def on_tensors(self, device) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The piece as a function of torch action rows [..., *shape] on `device` (the batched runner applies it
        without leaving torch); None where it passes actions through (not a Box space)."""
        if self._bounds is None:
            return None
        _, low, high = self._bounds
        return self.with_bounds(torch.as_tensor(low, device=device), torch.as_tensor(high, device=device))

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(low, high) of the Box action space as float32 arrays of the action's shape; None: not a Box space."""
        return None if self._bounds is None else self._bounds[1:]

    @staticmethod
    def with_bounds(low, high) -> Callable:
        """The piece as a function of action rows [..., *shape] of any array library whose arrays clip and add
        (torch tensors, JAX arrays), with `low`/`high` of that library or NumPy."""
        raise NotImplementedError

    def transform_space(self, space, action_space):
        if isinstance(action_space, gym.spaces.Box):
            shape = tuple(action_space.shape)
            self._bounds = (shape, np.broadcast_to(action_space.low, shape).astype(np.float32),
                            np.broadcast_to(action_space.high, shape).astype(np.float32))
        return space


class ClipActions(_BoxBounds):
    """Box actions clipped to the action space's bounds (`environment.clip_actions`)."""

    @staticmethod
    def with_bounds(low, high):
        return lambda actions: actions.clip(low, high)


class UnsquashActions(_BoxBounds):
    """The module acts in [-1, 1]; Box actions rescaled to the bounds (`config.plan_for(policy_id).unsquash_actions`)."""

    @staticmethod
    def with_bounds(low, high):
        return lambda actions: unsquash(actions, low, high)


class ModuleToEnvPipeline:
    def __init__(self, pieces: dict[str, ConnectorPiece], action_space):
        self.pieces = dict(pieces)
        for piece in self.pieces.values():
            piece.transform_space(action_space, action_space)
        self._steps = list(self.pieces.values())
        self.to_env = ActionAdapter(action_space)
        self.shape, self.dtype = self.to_env.shape, self.to_env.dtype  # the module's action layout

    def __call__(self, actions: np.ndarray, ctx: RowContext) -> list:
        for piece in self._steps:
            actions = piece(actions, ctx)
        return self.to_env(actions)

    def get_state(self) -> dict:
        return {"pieces": {key: p.get_state() for key, p in self.pieces.items()}}

    def set_state(self, state: dict) -> None:
        for key, piece_state in state.get("pieces", {}).items():
            if key in self.pieces:
                self.pieces[key].set_state(piece_state)
