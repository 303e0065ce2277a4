"""What `GET /weights` carries, in JSON any language can read: spaces, module specs and tensors.

    space   {"type": "Box", "shape": [18], "low": [...], "high": [...], "dtype": "float32"}
            {"type": "Discrete", "n": 5, "start": 0} | {"type": "MultiDiscrete", "nvec": [...]}
            | {"type": "MultiBinary", "n": [...]}
    module  {"module_class": "pkg.mod:Class" | null, "observation_space": space, "action_space": space,
             "model": {...the policy's model options}}
    tensor  {"dtype": "float32", "shape": [64, 18], "data": "<base64 of the little-endian bytes, C order>"}

A Python client rebuilds each module with `marl.modules.build_module` (the module and catalog code the
server used) and loads the tensors; `act` is the one forward pass both sides sample actions with.
"""

from __future__ import annotations

import base64

import gymnasium as gym
import numpy as np
import torch

from marl.data import sample_batch as sb


def space_to_json(space: gym.Space) -> dict:
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "low": space.low.reshape(-1).tolist(),
                "high": space.high.reshape(-1).tolist(), "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": list(np.atleast_1d(space.n).tolist())}
    raise ValueError(f"a {type(space).__name__} space has no wire form (Box, Discrete, MultiDiscrete, MultiBinary do)")


def space_from_json(d: dict) -> gym.Space:
    kind = d["type"]
    if kind == "Box":
        shape = tuple(d["shape"])
        low = np.asarray(d["low"], dtype=d["dtype"]).reshape(shape)
        high = np.asarray(d["high"], dtype=d["dtype"]).reshape(shape)
        return gym.spaces.Box(low, high, shape, dtype=np.dtype(d["dtype"]))
    if kind == "Discrete":
        return gym.spaces.Discrete(int(d["n"]), start=int(d.get("start", 0)))
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(np.asarray(d["nvec"], np.int64))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(d["n"] if len(d["n"]) > 1 else d["n"][0])
    raise ValueError(f"unknown space type {kind!r}")


def class_path(cls) -> str | None:
    if cls is None or isinstance(cls, str):
        return cls
    return f"{cls.__module__}:{cls.__qualname__}"


def tensors_to_json(state: dict[str, np.ndarray]) -> dict:
    out = {}
    for name, value in state.items():
        arr = np.ascontiguousarray(value)
        little = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        out[name] = {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": base64.b64encode(little.tobytes()).decode()}
    return out


def tensors_from_json(d: dict) -> dict[str, np.ndarray]:
    return {
        name: np.frombuffer(base64.b64decode(t["data"]), dtype=np.dtype(t["dtype"]).newbyteorder("<"))
        .astype(t["dtype"]).reshape(t["shape"])
        for name, t in d.items()
    }


def act(module, obs: np.ndarray, rng: torch.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Actions sampled for a stack of observations, their log-probs, and the value estimates (None without)."""
    with torch.inference_mode():
        res = module.forward_exploration({sb.OBS: torch.from_numpy(np.asarray(obs, np.float32))})
        dist = module.action_dist(res["action_dist_inputs"])
        action = dist.sample(rng)
        logp = dist.logp(action).numpy()
    vf = res.get("vf_preds")
    return action.numpy(), logp, (vf.numpy() if vf is not None else None)


def action_to_json(action: np.ndarray, discrete: bool):
    return int(action) if discrete else np.asarray(action, dtype=float).reshape(-1).tolist()
