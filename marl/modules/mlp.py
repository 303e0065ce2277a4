"""The default actor-critic: two MLPs (policy and value) built from the spaces."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from marl.modules.rl_module import RLModule

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "silu": nn.SiLU}
MODEL_KEYS = {"hiddens", "activation", "initial_log_std", "value_function"}


def _layer(n_in: int, n_out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(n_in: int, hiddens: list[int], n_out: int, activation: str, out_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hiddens:
        layers += [_layer(n_in, width, np.sqrt(2)), ACTIVATIONS[activation]()]
        n_in = width
    layers.append(_layer(n_in, n_out, out_gain))
    return nn.Sequential(*layers)


class ActorCriticMLP(RLModule):
    """Separate policy and value MLPs with orthogonal init (small policy head: near-uniform start).

    model options: hiddens (default [64, 64]), activation (tanh|relu|elu|silu),
    initial_log_std (Box actions; default 0.0), value_function (default true; false: a
    policy-only network with no value pass, for algorithms that record no values, e.g. PG).
    """

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        unknown = set(self.model_config) - MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown model option(s) {sorted(unknown)}; allowed: {sorted(MODEL_KEYS)}")
        hiddens = [int(h) for h in self.model_config.get("hiddens", [64, 64])]
        activation = self.model_config.get("activation", "tanh")
        if activation not in ACTIVATIONS:
            raise ValueError(f"model.activation '{activation}' is not one of {sorted(ACTIVATIONS)}")
        self.continuous = isinstance(action_space, gym.spaces.Box)
        n_out = self.action_dim // 2 if self.continuous else self.action_dim
        self.pi = mlp(self.obs_dim, hiddens, n_out, activation, out_gain=0.01)
        value_function = self.model_config.get("value_function", True)
        if not isinstance(value_function, bool):
            raise ValueError(f"model.value_function must be true or false, got {value_function!r}")
        self.vf = mlp(self.obs_dim, hiddens, 1, activation, out_gain=1.0) if value_function else None
        if self.continuous:
            init = float(self.model_config.get("initial_log_std", 0.0))
            self.log_std = nn.Parameter(torch.full((n_out,), init))

    # Acting and minibatch updates run hundreds of thousands of times per run on small batches, where
    # nn.Module call overhead costs as much as the math: walk the layers with plain functional calls
    # (the same addmm kernels nn.Linear calls, so the same numbers and gradients).
    def forward_train(self, batch):
        return self._outputs(batch)

    def _outputs(self, batch):
        out = {"action_dist_inputs": self._fast_inputs(batch)}
        if self.vf is not None:
            out["vf_preds"] = _functional(self.vf, batch["obs"]).squeeze(-1)
        return out

    def _fast_inputs(self, batch):
        out = _functional(self.pi, batch["obs"])
        if self.continuous:
            return torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return self.apply_action_mask(out, batch)

    def forward_exploration(self, batch):
        with torch.inference_mode():
            return self._outputs(batch)

    def forward_inference(self, batch):
        with torch.inference_mode():
            return {"action_dist_inputs": self._fast_inputs(batch)}


_FUNCTIONAL_ACTIVATIONS = {nn.Tanh: torch.tanh, nn.ReLU: torch.relu, nn.ELU: torch.nn.functional.elu, nn.SiLU: torch.nn.functional.silu}


def _functional(seq: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    for layer in seq:
        if isinstance(layer, nn.Linear):
            x = torch.addmm(layer.bias, x, layer.weight.t())
        else:
            x = _FUNCTIONAL_ACTIVATIONS[type(layer)](x)
    return x
