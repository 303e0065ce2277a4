"""Actor-critic with a centralised critic (MAPPO): the actor reads the agent's own
observation, the critic the global state of the env step (see
`marl.runners.global_state`). Only the critic needs the state, and only while
sampling and learning: acting greedily reads the observation alone.

model options: hiddens, activation (actor and critic), critic_hiddens (default:
hiddens), initial_log_std (Box actions), and, set by `MAPPOConfig` from the env:
state_dim, num_agents, agent_id (append a one-hot of the agent's index in
`possible_agents` to both inputs, so one shared network can tell agents apart).
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from marl.modules.mlp import ACTIVATIONS, _functional, mlp
from marl.modules.rl_module import RLModule

MODEL_KEYS = {"hiddens", "activation", "critic_hiddens", "initial_log_std", "state_dim", "num_agents", "agent_id"}


class CentralCriticMLP(RLModule):
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
        hiddens = [int(h) for h in cfg.get("hiddens", [64, 64])]
        critic_hiddens = [int(h) for h in cfg.get("critic_hiddens") or hiddens]
        activation = cfg.get("activation", "tanh")
        if activation not in ACTIVATIONS:
            raise ValueError(f"model.activation '{activation}' is not one of {sorted(ACTIVATIONS)}")
        extra = self.num_agents if self.agent_id else 0
        self.actor_in_dim, self.critic_in_dim = self.obs_dim + extra, self.state_dim + extra
        self.continuous = isinstance(action_space, gym.spaces.Box)
        n_out = self.action_dim // 2 if self.continuous else self.action_dim
        self.pi = mlp(self.actor_in_dim, hiddens, n_out, activation, out_gain=0.01)
        self.vf = mlp(self.critic_in_dim, critic_hiddens, 1, activation, out_gain=1.0)
        if self.continuous:
            self.log_std = nn.Parameter(torch.full((n_out,), float(cfg.get("initial_log_std", 0.0))))

    def _with_id(self, x: torch.Tensor, batch) -> torch.Tensor:
        if not self.agent_id:
            return x
        if "agent_index" not in batch:
            raise KeyError("CentralCriticMLP with agent_id needs the 'agent_index' input")
        one_hot = torch.nn.functional.one_hot(batch["agent_index"].long(), self.num_agents).to(x.dtype)
        return torch.cat([x, one_hot], dim=-1)

    def _state(self, batch) -> torch.Tensor:
        if "state" not in batch:
            raise KeyError("the centralised critic needs the 'state' input (the runner records it when the algorithm asks)")
        return self._with_id(batch["state"], batch)

    def _dist_inputs(self, logits: torch.Tensor, batch) -> torch.Tensor:
        if self.continuous:
            return torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return self.apply_action_mask(logits, batch)

    def forward_train(self, batch):
        logits = self.pi(self._with_id(batch["obs"], batch))
        return {"action_dist_inputs": self._dist_inputs(logits, batch), "vf_preds": self.vf(self._state(batch)).squeeze(-1)}

    def forward_exploration(self, batch):
        with torch.inference_mode():
            logits = _functional(self.pi, self._with_id(batch["obs"], batch))
            out = {"action_dist_inputs": self._dist_inputs(logits, batch)}
            if "state" in batch:  # bootstrapping passes only what the critic needs too
                out["vf_preds"] = _functional(self.vf, self._state(batch)).squeeze(-1)
            return out

    def forward_inference(self, batch):
        with torch.inference_mode():
            return {"action_dist_inputs": self._dist_inputs(_functional(self.pi, self._with_id(batch["obs"], batch)), batch)}
