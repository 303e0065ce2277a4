"""Gymnasium spaces as JSON: the one form a checkpoint's manifest and the policy server's `GET /weights` write.

    Box            {"type": "Box", "shape": [2, 3], "low": [[...], [...]], "high": [[...], [...]], "dtype": "float32"}
    Discrete       {"type": "Discrete", "n": 5, "start": 0}
    MultiDiscrete  {"type": "MultiDiscrete", "nvec": [3, 4], "start": [0, 0]}
    MultiBinary    {"type": "MultiBinary", "n": 4 | [2, 3]}    (n as the space was made: an int or a shape)
    Dict           {"type": "Dict", "spaces": {key: space}}
    Tuple          {"type": "Tuple", "spaces": [space, ...]}

The writer's form is the one above. The reader also takes the two forms written before they were one:

- checkpoint manifests (marl/checkpoint/manifest.py until this module): Box `dtype` as NumPy's type string
  ("<f4"); no other difference;
- the wire (marl/external/wire.py until this module): Box `low`/`high` flat (C order) whatever the shape;
  MultiDiscrete without `start` (read as 0); MultiBinary `n` always a list (`[4]` reads back as
  `MultiBinary((4,))`: the same shape and samples as `MultiBinary(4)`, which gymnasium calls unequal).

The earlier readers read the writer's form (nested bounds reshape to the shape; "float32" is a dtype name
both take), so a client or checkpoint reader of the previous release reads what this one writes, except an old
wire client given a MultiBinary made from an int (the wire carries none: served observations are Box, and
runners act in Discrete, MultiDiscrete and Box spaces only). Manifests round-trip every space exactly.
Errors are `SpaceJsonError` (a ValueError): a space without a JSON form, or an unknown type.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class SpaceJsonError(ValueError):
    """A space this module has no JSON form for, or JSON that is no space it writes."""


def space_to_json(space: gym.Space) -> dict:
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "low": space.low.tolist(), "high": space.high.tolist(),
                "dtype": np.dtype(space.dtype).name}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).tolist(), "start": np.asarray(space.start).tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise SpaceJsonError(f"a {type(space).__name__} space has no JSON form (Box, Discrete, MultiDiscrete, MultiBinary, "
                         "Dict and Tuple of these have one)")


def space_from_json(data: dict) -> gym.Space:
    kind = data.get("type") if isinstance(data, dict) else None
    if kind == "Box":
        dtype, shape = np.dtype(data["dtype"]), tuple(data["shape"])
        low = np.asarray(data["low"], dtype).reshape(shape)  # nested (this form, manifests) or flat (the old wire)
        high = np.asarray(data["high"], dtype).reshape(shape)
        return gym.spaces.Box(low, high, shape, dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiDiscrete":
        nvec = np.asarray(data["nvec"], np.int64)
        start = np.asarray(data["start"], np.int64) if "start" in data else None  # the old wire had none
        return gym.spaces.MultiDiscrete(nvec, start=start)
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(data["n"])
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_json(s) for k, s in data["spaces"].items()})
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_json(s) for s in data["spaces"]])
    raise SpaceJsonError(f"unknown space type {kind!r} (known: Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple)")
