"""Spaces as JSON (`marl.data.spaces_json`): one writer for checkpoint manifests and the policy server's wire,
one reader for its form and the two forms written before (manifests: "<f4" dtypes; the wire: flat Box bounds,
MultiDiscrete without `start`, MultiBinary `n` always a list)."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from marl.checkpoint import manifest
from marl.data.spaces_json import SpaceJsonError, space_from_json, space_to_json
from marl.errors import CheckpointError
from marl.external import wire

SPACES = [
    gym.spaces.Box(np.arange(6, dtype=np.float32).reshape(2, 3) - 10, np.arange(6, dtype=np.float32).reshape(2, 3)),
    gym.spaces.Box(-np.inf, np.inf, (4,), np.float64),
    gym.spaces.Box(0, 255, (3, 2, 2), np.uint8),
    gym.spaces.Discrete(5, start=-2),
    gym.spaces.MultiDiscrete([3, 4], start=[1, 0]),
    gym.spaces.MultiBinary(4),
    gym.spaces.MultiBinary([2, 3]),
    gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Tuple([gym.spaces.Box(-1, 1, (2,)), gym.spaces.MultiBinary(2)])}),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_every_space_round_trips_through_json_text(space):
    back = space_from_json(json.loads(json.dumps(space_to_json(space))))
    assert back == space


def test_the_wire_and_the_manifest_write_the_one_form():
    box = SPACES[0]
    assert wire.space_to_json(box) == manifest.space_to_json(box) == space_to_json(box)
    assert space_to_json(box)["dtype"] == "float32" and space_to_json(box)["low"] == box.low.tolist()


def test_old_manifest_form_reads():
    old = {"type": "Box", "low": [[-1.0, -2.0]], "high": [[1.0, 2.0]], "shape": [1, 2], "dtype": "<f4"}
    assert space_from_json(old) == gym.spaces.Box(np.array([[-1, -2]], np.float32), np.array([[1, 2]], np.float32))
    assert space_from_json({"type": "MultiDiscrete", "nvec": [3], "start": [2]}) == gym.spaces.MultiDiscrete([3], start=[2])
    assert space_from_json({"type": "MultiBinary", "n": 4}) == gym.spaces.MultiBinary(4)


def test_old_wire_form_reads():
    flat = {"type": "Box", "shape": [2, 2], "low": [0.0, 1.0, 2.0, 3.0], "high": [9.0] * 4, "dtype": "float32"}
    box = space_from_json(flat)
    assert box.shape == (2, 2) and box.low.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert space_from_json({"type": "MultiDiscrete", "nvec": [3, 4]}) == gym.spaces.MultiDiscrete([3, 4])
    assert space_from_json({"type": "Discrete", "n": 3}) == gym.spaces.Discrete(3)
    assert space_from_json({"type": "MultiBinary", "n": [4]}).shape == (4,)


def test_what_has_no_form_is_one_clear_error():
    with pytest.raises(SpaceJsonError, match="Text space has no JSON form"):
        space_to_json(gym.spaces.Text(5))
    with pytest.raises(SpaceJsonError, match="unknown space type 'Graph'"):
        space_from_json({"type": "Graph"})
    with pytest.raises(CheckpointError, match="checkpoint manifest"):
        manifest.space_to_json(gym.spaces.Text(5))
    with pytest.raises(ValueError):  # the server turns it into "no wire form": inference stays on the server
        wire.space_to_json(gym.spaces.Text(5))
