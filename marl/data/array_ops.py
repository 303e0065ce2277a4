"""One function per job on a batch column that is a NumPy array or a torch tensor.

A `SampleBatch` column is NumPy where rows were built in Python (the dict path, replay, offline data) and a torch
tensor where they were built from a batched runner's fragment, on its device. The jobs that read or combine
columns (learner connectors, concatenation, copies) call these, so each job is written once and runs in the
column's own library, on the column's own device: a tensor never takes a trip through the host.
Where NumPy is needed (replay buffers, offline files, checkpoints), `to_numpy` is the edge.
"""

from __future__ import annotations

import numpy as np
import torch

Column = np.ndarray | torch.Tensor


def is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def to_numpy(x: Column) -> np.ndarray:
    """The column as NumPy (a tensor: copied to the host where it lives elsewhere)."""
    return x.detach().cpu().numpy() if is_tensor(x) else np.asarray(x)


def float32(x: Column) -> Column:
    return x.to(torch.float32) if is_tensor(x) else x.astype(np.float32)


def where(condition: Column, a: Column, b: Column) -> Column:
    """a where `condition` holds, else b (element-wise; `condition` read as booleans)."""
    if is_tensor(condition):
        return torch.where(condition.to(torch.bool), a, b)
    return np.where(condition, a, b)


def next_row(x: Column) -> Column:
    """Each row's successor (the last row's is the first: the callers mask the rows where that matters)."""
    return torch.roll(x, -1, 0) if is_tensor(x) else np.roll(x, -1)


def exp(x: Column) -> Column:
    return torch.exp(x) if is_tensor(x) else np.exp(x)


def minimum(bound: float, x: Column) -> Column:
    return torch.clamp(x, max=bound) if is_tensor(x) else np.minimum(bound, x)


def clip(x: Column, low: float, high: float) -> Column:
    return torch.clamp(x, low, high) if is_tensor(x) else np.clip(x, low, high)


def std(x: Column) -> Column:
    """The population standard deviation (NumPy's default; torch's needs `correction=0`)."""
    return torch.std(x, correction=0) if is_tensor(x) else x.std()


def copy(x: Column) -> Column:
    return x.clone() if is_tensor(x) else x.copy()


def nbytes(x: Column) -> int:
    return x.numel() * x.element_size() if is_tensor(x) else x.nbytes


def concatenate(parts: list[Column]) -> Column:
    """Rows of `parts` end to end: tensors when they all are (on the first's device), else NumPy."""
    if all(is_tensor(p) for p in parts):
        return torch.cat([p.to(parts[0].device) for p in parts])
    return np.concatenate([to_numpy(p) for p in parts])


def int64(x: Column) -> Column:
    return x.to(torch.int64) if is_tensor(x) else x.astype(np.int64)
