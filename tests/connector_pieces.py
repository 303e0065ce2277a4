"""Connector pieces a user might write, named by import path in tests (`tests.connector_pieces:BiasFeature`)."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np

from marl.connectors import ConnectorPiece
from marl.connectors.env_to_module import flat_box, with_observation
from marl.data import sample_batch as sb


class BiasFeature(ConnectorPiece):
    """Appends a constant feature `value` and counts the rows it saw.

    State: `_rows` (this copy's rows, kept in runner checkpoints). Synced: every runner's
    row counts are merged by the learner (`_central`) and sent back with the weights.
    With MARL_TEST_PIECE_LOG set, the first call of each copy appends a line to that file.
    """

    synced = True

    def __init__(self, value: float = 1.0):
        if value == 0:
            raise ValueError("value must not be 0")
        self.value = value
        self._rows = 0
        self._delta = 0
        self._central = 0
        self._logged = False

    def transform_space(self, space, action_space):
        box = flat_box(space)
        low = np.append(box.low, min(self.value, 0.0)).astype(np.float32)
        high = np.append(box.high, max(self.value, 0.0)).astype(np.float32)
        return with_observation(space, gym.spaces.Box(low, high, low.shape, np.float32))

    def __call__(self, obs, ctx):
        log = os.environ.get("MARL_TEST_PIECE_LOG")
        if log and not self._logged:
            with open(log, "a") as f:
                f.write(f"{os.getpid()} update_stats={ctx.update_stats}\n")
            self._logged = True
        if not ctx.peek:
            self._rows += len(obs)
            if ctx.update_stats:
                self._delta += len(obs)
        return np.concatenate([obs, np.full((len(obs), 1), self.value, np.float32)], axis=1)

    def get_state(self) -> dict:
        return {"rows": self._rows, "delta": self._delta, "central": self._central}

    def set_state(self, state: dict) -> None:
        self._rows, self._delta, self._central = int(state["rows"]), int(state["delta"]), int(state["central"])

    def pop_delta(self):
        delta, self._delta = self._delta, 0
        return delta

    def merge_delta(self, delta) -> None:
        self._central += int(delta)

    def get_central(self):
        return self._central

    def set_central(self, central) -> None:
        self._central = int(central)


class RecordRewards(ConnectorPiece):
    """A learner piece that keeps the rewards of the last batch it saw (after the pieces before it)."""

    def __init__(self):
        self._last = None

    def __call__(self, batch, ctx):
        self._last = np.array(batch[sb.REWARDS])
        return batch


class NotAPiece:
    pass
