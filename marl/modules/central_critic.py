"""Actor-critic with a centralised critic (MAPPO): the actor reads the agent's own
observation, the critic the global state of the env step (see
`marl.runners.global_state`). Only the critic needs the state, and only while
sampling and learning: acting greedily reads the observation alone.

model options: hiddens, activation (actor and critic), critic_hiddens (default:
hiddens), initial_log_std (Box actions), and, set by `MAPPOConfig` from the env:
state_dim, num_agents, agent_id (append a one-hot of the agent's index in
`possible_agents` to both inputs, so one shared network can tell agents apart);
conv_filters / conv_activation (image observations: the actor reads them through a
conv encoder, `marl.modules.catalog`); state_frame (set by `MAPPOConfig` where the global state is the
agents' frames joined: the critic reads each frame through one shared conv stack, `FramesEncoder`, and
joins the features; otherwise the state is a flat vector).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from marl.modules.catalog import (
    ENCODER_KEYS, FlatEncoder, IdentityCore, check_activation, check_hiddens, check_popart, core_for, encoder_for, gaussian_log_std,
    policy_head, state_encoder, value_head,
)
from marl.modules.functional import as_float_state, run_sequential
from marl.modules.numpy_acting import NumpyActor
from marl.modules.rl_module import RLModule

MODEL_KEYS = ({"hiddens", "activation", "critic_hiddens", "initial_log_std", "state_dim", "num_agents", "agent_id",
               "state_frame", "popart"} | ENCODER_KEYS)


class CentralCriticMLP(RLModule):
    MODEL_KEYS = MODEL_KEYS
    keeps_image_obs = True

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        cfg = self.model_config
        unknown = set(cfg) - MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown model option(s) {sorted(unknown)}; allowed: {sorted(MODEL_KEYS)}")
        if not cfg.get("state_dim"):
            raise ValueError("CentralCriticMLP needs model option 'state_dim' (MAPPOConfig sets it from the env's global state)")
        self.state_dim = int(cfg["state_dim"])
        self.agent_id = bool(cfg.get("agent_id", False))
        # The critic reads the global state; with agent ids both networks read the agent's index too.
        self.inputs = ("obs", "action_mask", "state") + (("agent_index",) if self.agent_id else ())
        self.num_agents = int(cfg.get("num_agents", 0))
        if self.agent_id and self.num_agents < 1:
            raise ValueError("model option agent_id needs num_agents >= 1")
        hiddens = check_hiddens(cfg.get("hiddens", [64, 64]))
        critic_hiddens = check_hiddens(cfg.get("critic_hiddens") or hiddens, "critic_hiddens")
        activation = check_activation(cfg.get("activation", "tanh"))
        extra = self.num_agents if self.agent_id else 0
        self.encoder = encoder_for(observation_space, cfg)
        self.core = core_for(self.encoder.out_dim, cfg)
        self._direct = isinstance(self.encoder, FlatEncoder) and isinstance(self.core, IdentityCore)
        self.state_encoder = state_encoder(self.state_dim, cfg)
        self._flat_state = isinstance(self.state_encoder, FlatEncoder)
        self.actor_in_dim, self.critic_in_dim = self.core.out_dim + extra, self.state_encoder.out_dim + extra
        self.continuous = isinstance(action_space, gym.spaces.Box)
        self.pi = policy_head(self.actor_in_dim, hiddens, action_space, activation)
        self.vf = value_head(self.critic_in_dim, critic_hiddens, activation, check_popart(cfg.get("popart", False)))
        if self.continuous:
            self.log_std = gaussian_log_std(action_space, cfg.get("initial_log_std", 0.0))
        # Rows of the identity are the one-hots (the same values F.one_hot gives, at a third of its cost:
        # it checks the index range with a pass of its own). A plain attribute, not a buffer: not in the weights.
        self._id_rows = torch.eye(max(self.num_agents, 1))

    def _ids(self, batch) -> torch.Tensor | None:
        """The rows' agent one-hots (once per forward pass: the actor's and the critic's input share them)."""
        if not self.agent_id:
            return None
        if "agent_index" not in batch:
            raise KeyError("CentralCriticMLP with agent_id needs the 'agent_index' input")
        index = batch["agent_index"]
        if self._id_rows.device != index.device:  # the learner may live on CUDA
            self._id_rows = self._id_rows.to(index.device)
        return self._id_rows.index_select(0, index.long())

    def _actor_in(self, batch, ids: torch.Tensor | None) -> torch.Tensor:
        obs = batch["obs"]
        return self._join(obs if self._direct else self.core(self.encoder(obs)), ids)

    def _with_id(self, x: torch.Tensor, batch) -> torch.Tensor:
        """`x` with the batch's agent one-hots appended (when agent_id is on)."""
        return self._join(x, self._ids(batch))

    @staticmethod
    def _join(x: torch.Tensor, ids: torch.Tensor | None) -> torch.Tensor:
        return x if ids is None else torch.cat([x, ids.to(x.dtype)], dim=-1)

    def _state(self, batch, ids: torch.Tensor | None) -> torch.Tensor:
        if "state" not in batch:
            raise KeyError("the centralised critic needs the 'state' input (the runner records it when the algorithm asks)")
        state = batch["state"]
        return self._join(as_float_state(state) if self._flat_state else self.state_encoder(state), ids)

    def _dist_inputs(self, logits: torch.Tensor, batch) -> torch.Tensor:
        if self.continuous:
            return torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return self.apply_action_mask(logits, batch)

    # Minibatch updates and acting walk the layers with plain functional calls (mlp._functional: the same
    # addmm kernels nn.Linear calls, so the same numbers and gradients, without nn.Module call overhead).
    def forward_train(self, batch):
        ids = self._ids(batch)
        logits = run_sequential(self.pi, self._actor_in(batch, ids))
        return {"action_dist_inputs": self._dist_inputs(logits, batch),
                "vf_preds": run_sequential(self.vf, self._state(batch, ids)).squeeze(-1)}

    def forward_exploration(self, batch):
        with torch.inference_mode():
            ids = self._ids(batch)
            logits = run_sequential(self.pi, self._actor_in(batch, ids))
            out = {"action_dist_inputs": self._dist_inputs(logits, batch)}
            if "state" in batch:  # bootstrapping passes only what the critic needs too
                out["vf_preds"] = run_sequential(self.vf, self._state(batch, ids)).squeeze(-1)
            return out

    def forward_inference(self, batch):
        with torch.inference_mode():
            logits = run_sequential(self.pi, self._actor_in(batch, self._ids(batch)))
            return {"action_dist_inputs": self._dist_inputs(logits, batch)}

    def numpy_actor(self):
        # Mirrors this class's own passes only (a subclass acts in torch); the joins as above, in NumPy.
        if type(self) is not CentralCriticMLP or not self._direct or not self._flat_state:
            return None
        id_rows = np.eye(max(self.num_agents, 1), dtype=np.float32)
        agent_id = self.agent_id

        def join(x: np.ndarray, inputs: dict) -> np.ndarray:
            return np.concatenate([x, id_rows[inputs["agent_index"]]], axis=-1) if agent_id else x

        def vf_input(inputs: dict) -> np.ndarray | None:
            state = inputs.get("state")
            if state is None:  # acting without the state (no critic pass), as forward_exploration
                return None
            if not np.issubdtype(state.dtype, np.floating):
                state = state.astype(np.float32) * np.float32(1.0 / 255.0)  # as_float_state
            return join(state, inputs)

        return NumpyActor.of(self.pi, self.vf, self.action_space, self.log_std if self.continuous else None,
                             pi_input=lambda inputs: join(inputs["obs"], inputs), vf_input=vf_input)
