"""Where a learner computes: the CPU, or a CUDA device when `learners.num_gpus_per_learner` > 0.

Env runners always act on the CPU (small batched forward passes, weights as NumPy). A learner on
a GPU holds its modules, target copies and optimiser state there; each update moves its batch's
loss columns to the device once (from pinned host memory, asynchronously), before the epochs,
never per minibatch, and the weights it hands to runners and checkpoints come back as NumPy.
A learner actor asks Ray for `num_gpus_per_learner` GPUs: Ray makes exactly those visible to it
(CUDA_VISIBLE_DEVICES), so its device is the current CUDA device. Data-parallel learners on GPUs
average gradients over NCCL (`marl.learners.distributed`).
"""

from __future__ import annotations

import numpy as np
import torch

from marl.errors import ConfigError


def check_gpus_available(num_gpus_per_learner: float) -> None:
    """A ConfigError, in one line, when GPUs are asked for but torch here cannot use CUDA."""
    if num_gpus_per_learner > 0 and not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise ConfigError(
            f"'learners.num_gpus_per_learner' = {num_gpus_per_learner:g} asks for a GPU, but torch.cuda.is_available() "
            f"is False here (torch {torch.__version__}, {build}); set it to 0 to learn on the CPU"
        )


def learner_device(num_gpus_per_learner: float) -> torch.device:
    """The device a learner computes on (see the module doc)."""
    if num_gpus_per_learner <= 0:
        return torch.device("cpu")
    check_gpus_available(num_gpus_per_learner)
    return torch.device("cuda", torch.cuda.current_device())


def to_device(arrays: dict[str, np.ndarray | torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Arrays and tensors on `device`, moved once: from the host through pinned memory, without blocking, for
    CUDA; tensors already there (a batched runner's fragment sampled on the learner's device) as they are."""
    tensors = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in arrays.items()}
    return {k: _on(t, device) for k, t in tensors.items()}


def _on(tensor: torch.Tensor | dict, device: torch.device) -> torch.Tensor | dict:
    if isinstance(tensor, dict):  # a stateful module's sequences: their entering states by name
        return {k: _on(t, device) for k, t in tensor.items()}
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
