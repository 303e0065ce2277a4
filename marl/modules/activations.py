"""tanh as 2 * sigmoid(2x) - 1: the same function, on a vectorised kernel.

PyTorch's CPU `tanh` forward runs element by element on this build (torch 2.13, AVX-512
capability): 220 us for a 512 x 128 float32 block, as slow as at the `default` capability,
against 36 us for `sigmoid` and 16 us for `tanh_backward` (measured on one thread, see
benchmarks/README.md). The default actor-critics put a tanh after every hidden layer, so it
was a fifth of a PPO update on simple_spread. The identity gives the same values to within
2e-7 (float32 rounding) and the gradient is tanh's own, 1 - y^2, from the saved output.
Below SMALL elements (a runner's forward pass over a few dozen agent rows) the identity's four
kernel calls cost more than the slow kernel saves, and `torch.tanh` itself runs.
"""

from __future__ import annotations

import torch
from torch import nn

SMALL = 4096  # elements: the measured break-even of torch.tanh and the identity (3-6k on one thread)


def _via_sigmoid(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)


class _SigmoidTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = _via_sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x), computed as 2 * sigmoid(2x) - 1 on blocks of SMALL elements or more (the autograd node only where a
    gradient is wanted)."""
    if x.numel() < SMALL or x.device.type != "cpu":  # (CUDA's tanh is one fast kernel)
        return torch.tanh(x)
    if x.requires_grad and torch.is_grad_enabled():
        return _SigmoidTanh.apply(x)
    return _via_sigmoid(x)


class Tanh(nn.Tanh):
    """`nn.Tanh` on the vectorised kernel (an `nn.Tanh`, without parameters: state dicts are unchanged)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tanh(x)


# The activations every acting backend runs, by name: one description of a network (`mlp_description`) that torch's
# functional pass (`marl.modules.functional`), the NumPy actor (`marl.modules.numpy_acting`) and the compiled JAX
# rollout (`marl.runners.jax_rollout`) each map to their own functions.
ACTIVATION_NAMES: dict[type, str] = {Tanh: "tanh", nn.Tanh: "tanh", nn.ReLU: "relu", nn.ELU: "elu", nn.SiLU: "silu"}


def mlp_description(seq: nn.Sequential) -> list | None:
    """`seq` as [("linear", nn.Linear) | ("activation", name)], every layer a biased Linear or an activation of
    ACTIVATION_NAMES; None otherwise (a network no backend but torch runs)."""
    layers = []
    for layer in seq:
        if isinstance(layer, nn.Linear) and layer.bias is not None:  # (a PopArt ValueScale is a 1 -> 1 Linear)
            layers.append(("linear", layer))
        elif type(layer) in ACTIVATION_NAMES:
            layers.append(("activation", ACTIVATION_NAMES[type(layer)]))
        else:
            return None
    return layers
