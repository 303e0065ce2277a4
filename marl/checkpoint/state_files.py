"""State trees on disk without pickle: JSON for structure, safetensors for arrays.

A state tree is what components return from `get_state()`: nested dicts,
lists and tuples of numbers, strings, NumPy arrays and torch tensors (an
optimiser's `state_dict()`, an RNG state, a replay buffer's columns).
`write_tree(tree, dir, stem)` stores it as `stem.json` plus, when it holds
large arrays, `stem.safetensors`; `read_tree(dir, stem)` gives back the same
tree: same container types, same dtypes, bit-identical values. Nothing in
either file is executable, so loading a checkpoint cannot run code.

Small arrays (an RNG state, a scalar step count) are inlined in the JSON as
base64 bytes; large ones go to the safetensors file under their tree path.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file
from safetensors.numpy import load_file

INLINE_MAX_BYTES = 512


class StateFileError(ValueError):
    """A state tree that cannot be written or read; the message names the path in the tree."""


def _is_plain_key(key) -> bool:
    return isinstance(key, str) and not key.startswith("__")


def encode_tree(tree, arrays: dict[str, np.ndarray], path: str = ""):
    """JSON-able form of `tree`; large arrays are moved into `arrays` (key = tree path)."""

    if tree is None or isinstance(tree, (bool, str)):
        return tree
    if isinstance(tree, int):
        return tree
    if isinstance(tree, float):
        return tree  # json writes repr(float): exact round trip, nan/inf included
    if isinstance(tree, torch.Tensor):
        return {"__tensor__": _encode_array(tree.detach().cpu().numpy(), arrays, path)}
    if isinstance(tree, np.ndarray):
        return {"__ndarray__": _encode_array(tree, arrays, path)}
    if isinstance(tree, np.generic):
        return {"__scalar__": _encode_array(np.asarray(tree), arrays, path)}
    if isinstance(tree, dict):
        if all(_is_plain_key(k) for k in tree):
            return {k: encode_tree(v, arrays, f"{path}.{k}" if path else k) for k, v in tree.items()}
        return {"__dict__": [[encode_tree(k, arrays, f"{path}.<key{i}>"), encode_tree(v, arrays, f"{path}.{i}")]
                             for i, (k, v) in enumerate(tree.items())]}
    if isinstance(tree, tuple):
        return {"__tuple__": [encode_tree(v, arrays, f"{path}.{i}") for i, v in enumerate(tree)]}
    if isinstance(tree, list):
        return [encode_tree(v, arrays, f"{path}.{i}") for i, v in enumerate(tree)]
    raise StateFileError(
        f"cannot store a {type(tree).__module__}.{type(tree).__qualname__} at '{path or '<root>'}' of a state tree: "
        "only dicts, lists, tuples, numbers, strings, NumPy arrays and torch tensors are stored (no pickled objects)"
    )


def _encode_array(array: np.ndarray, arrays: dict, path: str) -> dict:
    if array.dtype.hasobject:
        raise StateFileError(f"cannot store an object array at '{path}' of a state tree")
    if not array.flags.c_contiguous:
        array = array.copy(order="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)
    if array.nbytes <= INLINE_MAX_BYTES:
        return {"dtype": array.dtype.str, "shape": list(array.shape), "b64": base64.b64encode(array.tobytes()).decode()}
    key = path or "<root>"
    arrays[key] = array
    return {"key": key}


def decode_tree(node, arrays: dict[str, np.ndarray]):
    if isinstance(node, list):
        return [decode_tree(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (tag, body), = node.items()
        if tag == "__tensor__":
            return torch.from_numpy(_decode_array(body, arrays))
        if tag == "__ndarray__":
            return _decode_array(body, arrays)
        if tag == "__scalar__":
            return _decode_array(body, arrays)[()]
        if tag == "__tuple__":
            return tuple(decode_tree(v, arrays) for v in body)
        if tag == "__dict__":
            return {_hashable(decode_tree(k, arrays)): decode_tree(v, arrays) for k, v in body}
    return {k: decode_tree(v, arrays) for k, v in node.items()}


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def _decode_array(body: dict, arrays: dict) -> np.ndarray:
    if "key" in body:
        try:
            return np.array(arrays[body["key"]])  # writable copy
        except KeyError:
            raise StateFileError(f"array '{body['key']}' is missing from the state's safetensors file") from None
    raw = base64.b64decode(body["b64"])
    return np.frombuffer(raw, dtype=np.dtype(body["dtype"])).reshape(body["shape"]).copy()


def write_tree(tree, directory: Path, stem: str) -> list[str]:
    """Writes `stem.json` (+ `stem.safetensors` for large arrays); returns the file names written."""

    arrays: dict[str, np.ndarray] = {}
    encoded = encode_tree(tree, arrays)
    directory.mkdir(parents=True, exist_ok=True)
    names = []
    if arrays:
        save_file(arrays, str(directory / f"{stem}.safetensors"))
        fsync_file(directory / f"{stem}.safetensors")
        names.append(f"{stem}.safetensors")
    write_json(directory / f"{stem}.json", {"arrays": bool(arrays), "tree": encoded})
    names.append(f"{stem}.json")
    return names


def read_tree(directory: Path, stem: str):
    file = directory / f"{stem}.json"
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise StateFileError(f"state file '{file}' is missing") from None
    except json.JSONDecodeError as err:
        raise StateFileError(f"state file '{file}' is not valid JSON: {err}") from None
    arrays = load_file(str(directory / f"{stem}.safetensors")) if data.get("arrays") else {}
    return decode_tree(data["tree"], arrays)


def write_json(file: Path, data) -> None:
    with open(file, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())


def fsync_file(file: Path) -> None:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Makes a rename inside `directory` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
