"""What `GET /weights` carries, in JSON any language can read: spaces, module specs and tensors.

    space   {"type": "Box", "shape": [18], "low": [...], "high": [...], "dtype": "float32"}
            | {"type": "Discrete", "n": 5, "start": 0} | {"type": "MultiDiscrete", "nvec": [...], "start": [...]} | ...
            (`marl.data.spaces_json`, the form checkpoints keep too: bounds nested to the shape; earlier
            servers' flat bounds and MultiDiscrete without `start` are read as well)
    module  {"module_class": "pkg.mod:Class" | null, "observation_space": space, "action_space": space,
             "model": {...the policy's model options}}
    tensor  {"dtype": "float32", "shape": [64, 18], "data": "<base64 of the little-endian bytes, C order>"}

A Python client rebuilds each module with `marl.modules.build_module` (the module and catalog code the
server used) and loads the tensors; `act` is the one forward pass both sides sample actions with.
"""

from __future__ import annotations

import base64

import numpy as np
import torch

from marl.data import sample_batch as sb
from marl.data.spaces_json import space_from_json, space_to_json  # noqa: F401  (the wire's spaces, importable from here)


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
