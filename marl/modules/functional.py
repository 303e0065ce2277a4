"""What every network of `marl.modules` shares: the logit of an illegal action, the functional pass of an
`nn.Sequential` (the fast path of the default networks) and the float form of a global state."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from marl.modules.activations import ACTIVATION_NAMES, tanh

MASKED_LOGIT = -1e9


def as_float_state(state: torch.Tensor) -> torch.Tensor:
    """The critic's float input: a uint8 state (frames: `marl.runners.global_state`) scaled to [0, 1]."""
    return state if state.is_floating_point() else state.float() * (1.0 / 255.0)


TORCH_ACTIVATIONS = {"tanh": tanh, "relu": torch.relu, "elu": F.elu, "silu": F.silu}
_FUNCTIONAL_ACTIVATIONS = {kind: TORCH_ACTIVATIONS[name] for kind, name in ACTIVATION_NAMES.items()}


def run_sequential(seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    # F.linear is the addmm(bias, x, weight.t()) nn.Linear runs, in one call (no Python-side transpose), and the
    # parameters are read from the layer's own table (nn.Module.__getattr__ is a Python function per lookup).
    # Anything else (a parametrised or custom layer) is called as a module.
    for layer in seq._modules.values():
        kind = type(layer)
        if kind is nn.Linear:
            params = layer._parameters
            x = F.linear(x, params["weight"], params["bias"])
        else:
            activation = _FUNCTIONAL_ACTIVATIONS.get(kind)
            x = activation(x) if activation is not None else layer(x)
    return x
