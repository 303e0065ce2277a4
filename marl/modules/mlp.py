"""The default actor-critic: encoder -> core -> policy and value heads (`marl.modules.catalog`).

On flat observations the encoder and core are the identity, so this is two MLPs (policy and
value) over the observation, as before; image observations get a conv encoder shared by both heads.
"""

from __future__ import annotations


import gymnasium as gym
import torch

from marl.modules.functional import run_sequential
from marl.modules.catalog import (
    ACTIVATIONS,
    ENCODER_KEYS,
    FlatEncoder,
    IdentityCore,
    check_activation,
    check_hiddens,
    check_popart,
    core_for,
    encoder_for,
    gaussian_log_std,
    mlp,
    policy_head,
    value_head,
)
from marl.modules.numpy_acting import OBS_INPUT, NumpyActor
from marl.modules.rl_module import RLModule

__all__ = ["ACTIVATIONS", "MODEL_KEYS", "ActorCriticMLP", "mlp"]  # mlp, ACTIVATIONS: the catalog's, kept importable here
MODEL_KEYS = {"hiddens", "activation", "initial_log_std", "value_function", "popart"} | ENCODER_KEYS


class ActorCriticMLP(RLModule):
    """Separate policy and value MLPs with orthogonal init (small policy head: near-uniform start).

    model options: hiddens (default [64, 64]), activation (tanh|relu|elu|silu),
    initial_log_std (Box actions; default 0.0), value_function (default true; false: a
    policy-only network with no value pass, for algorithms that record no values, e.g. PG),
    popart (default false: PopArt value normalisation, `marl.modules.popart`),
    conv_filters / conv_activation (image observations; see `marl.modules.catalog`).
    """
    MODEL_KEYS = MODEL_KEYS  # the options it reads (checked before a run starts: marl.modules.build.model_keys)

    keeps_image_obs = True

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        unknown = set(self.model_config) - MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown model option(s) {sorted(unknown)}; allowed: {sorted(MODEL_KEYS)}")
        hiddens = check_hiddens(self.model_config.get("hiddens", [64, 64]))
        activation = check_activation(self.model_config.get("activation", "tanh"))
        value_function = self.model_config.get("value_function", True)
        if not isinstance(value_function, bool):
            raise ValueError(f"model.value_function must be true or false, got {value_function!r}")
        self.encoder = encoder_for(observation_space, self.model_config)
        self.core = core_for(self.encoder.out_dim, self.model_config)
        # Flat observations, no core: the heads read the observation itself (the hot path stays two MLPs).
        self._direct = isinstance(self.encoder, FlatEncoder) and isinstance(self.core, IdentityCore)
        self.continuous = isinstance(action_space, gym.spaces.Box)
        self.pi = policy_head(self.core.out_dim, hiddens, action_space, activation)
        popart = check_popart(self.model_config.get("popart", False))
        self.vf = value_head(self.core.out_dim, hiddens, activation, popart) if value_function else None
        if self.continuous:
            self.log_std = gaussian_log_std(action_space, self.model_config.get("initial_log_std", 0.0))

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        return obs if self._direct else self.core(self.encoder(obs))

    # Acting and minibatch updates run hundreds of thousands of times per run on small batches, where
    # nn.Module call overhead costs as much as the math: walk the layers with plain functional calls
    # (the same addmm kernels nn.Linear calls, so the same numbers and gradients).
    def forward_train(self, batch):
        return self._outputs(batch)

    def _outputs(self, batch):
        h = batch["obs"] if self._direct else self.core(self.encoder(batch["obs"]))
        out = {"action_dist_inputs": self._fast_inputs(batch, h)}
        vf = self._modules.get("vf")  # (one dict read: `self.vf` goes through nn.Module.__getattr__)
        if vf is not None:
            out["vf_preds"] = run_sequential(vf, h).squeeze(-1)
        return out

    def _fast_inputs(self, batch, h):
        out = run_sequential(self._modules["pi"], h)
        if self.continuous:
            return torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out if batch.get("action_mask") is None else self.apply_action_mask(out, batch)

    # Runners call these inside their own inference_mode block: entering it again costs five Python calls.
    def forward_exploration(self, batch):
        if torch.is_inference_mode_enabled():
            return self._outputs(batch)
        with torch.inference_mode():
            return self._outputs(batch)

    def forward_inference(self, batch):
        if not torch.is_inference_mode_enabled():
            with torch.inference_mode():
                return self.forward_inference(batch)
        h = batch["obs"] if self._direct else self.core(self.encoder(batch["obs"]))
        return {"action_dist_inputs": self._fast_inputs(batch, h)}

    def numpy_actor(self):
        # Mirrors this class's own passes only: a subclass may change them, and acts in torch.
        if type(self) is not ActorCriticMLP or not self._direct:
            return None
        return NumpyActor.of(self.pi, self.vf, self.action_space, self.log_std if self.continuous else None,
                             OBS_INPUT, OBS_INPUT)
