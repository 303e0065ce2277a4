"""Q-network for the DQN family: an MLP trunk with a plain or dueling head, epsilon-greedy acting.

Dueling (Wang et al. 2016): Q(s, a) = V(s) + A(s, a) - mean_a A(s, a).
Acting goes through the same Categorical the runner samples from: the
exploration pass returns the logits of the epsilon-greedy distribution
(eps spread over the legal actions, the rest on the greedy one), so the
runner needs no DQN-specific code.

model options: hiddens (default [64, 64]), activation, dueling (default true), layer_norm (default false: a
LayerNorm after each hidden layer, PQN's),
epsilon: piecewise-linear schedule [[env_step, eps], ...] over the run's
env steps (default [[0, 1.0], [10000, 0.05]]), conv_filters / conv_activation
(image observations: encoder -> core -> trunk -> heads, `marl.modules.catalog`).
"""

from __future__ import annotations

import gymnasium as gym
import torch

from marl.modules.catalog import (
    ACTIVATIONS, ENCODER_KEYS, FlatEncoder, IdentityCore, check_activation, check_hiddens, core_for, encoder_for, q_head,
    q_trunk,
)
from marl.modules.functional import MASKED_LOGIT, run_sequential
from marl.modules.rl_module import RLModule

MODEL_KEYS = {"hiddens", "activation", "dueling", "epsilon", "layer_norm"} | ENCODER_KEYS


def piecewise_linear(schedule: list, t: float) -> float:
    """Value of a [[t0, v0], [t1, v1], ...] schedule at t (held constant outside the points)."""
    points = sorted((float(a), float(b)) for a, b in schedule)
    if t <= points[0][0]:
        return points[0][1]
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t < t1:
            return v0 + (t - t0) / (t1 - t0) * (v1 - v0)
    return points[-1][1]


class QMLP(RLModule):
    MODEL_KEYS = MODEL_KEYS
    keeps_image_obs = True

    def __init__(self, observation_space, action_space, model_config=None, *, extra_inputs: int = 0):
        """`extra_inputs`: width of features joined to the encoded observation before the trunk (a caller's
        own, e.g. JointQModule's agent-id one-hot on images), passed as `extra_features` / `extra`."""
        super().__init__(observation_space, action_space, model_config)
        unknown = set(self.model_config) - MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown Q-model option(s) {sorted(unknown)}; allowed: {sorted(MODEL_KEYS)}")
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"Q-learning needs a Discrete action space, got {action_space}")
        hiddens = check_hiddens(self.model_config.get("hiddens", [64, 64]))
        activation = check_activation(self.model_config.get("activation", "relu"))
        self.dueling = bool(self.model_config.get("dueling", True))
        self.epsilon_schedule = self.model_config.get("epsilon", [[0, 1.0], [10000, 0.05]])
        piecewise_linear(self.epsilon_schedule, 0)  # fail early on a malformed schedule
        n = self.action_dim
        self.encoder = encoder_for(observation_space, self.model_config)
        self.core = core_for(self.encoder.out_dim, self.model_config)
        self._direct = isinstance(self.encoder, FlatEncoder) and isinstance(self.core, IdentityCore)
        self.trunk, trunk_out = q_trunk(self.core.out_dim + int(extra_inputs), hiddens, activation,
                                        bool(self.model_config.get("layer_norm", False)))
        self.act = ACTIVATIONS[activation]()
        self.advantage = q_head(trunk_out, n)
        self.value = q_head(trunk_out, 1) if self.dueling else None
        self.epsilon = float(piecewise_linear(self.epsilon_schedule, 0))

    def set_exploration_step(self, env_steps: int) -> None:
        self.epsilon = float(piecewise_linear(self.epsilon_schedule, env_steps))

    def q_values(self, obs: torch.Tensor, fast: bool = False, extra: torch.Tensor | None = None) -> torch.Tensor:
        run = run_sequential if fast else (lambda seq, x: seq(x))
        h = obs if self._direct else self.core(self.encoder(obs))
        if extra is not None:
            h = torch.cat([h, extra.to(h.dtype)], dim=-1)
        if self.trunk is not None:
            h = self.act(run(self.trunk, h))
        adv = run(self.advantage, h)
        if not self.dueling:
            return adv
        return run(self.value, h) + adv - adv.mean(dim=-1, keepdim=True)

    def forward_train(self, batch):
        return {"q_values": self.q_values(batch["obs"])}

    def _greedy_logits(self, q: torch.Tensor, batch, epsilon: float) -> torch.Tensor:
        mask = batch.get("action_mask")
        if mask is None:  # every action legal: the same float32 arithmetic as below, in fewer kernels (acting is hot)
            greedy = torch.nn.functional.one_hot(q.argmax(-1), q.shape[-1]).to(q.dtype)
            spread = torch.tensor(epsilon, dtype=q.dtype) / q.shape[-1]
            return torch.log((spread + (1.0 - epsilon) * greedy).clamp(min=1e-30))
        legal = torch.ones_like(q) if mask is None else (mask > 0.5).to(q.dtype)
        q = q.masked_fill(legal < 0.5, -torch.inf)
        greedy = torch.nn.functional.one_hot(q.argmax(-1), q.shape[-1]).to(q.dtype)
        probs = epsilon * legal / legal.sum(-1, keepdim=True).clamp(min=1.0) + (1.0 - epsilon) * greedy
        return torch.log(probs.clamp(min=1e-30)).masked_fill(legal < 0.5, MASKED_LOGIT)

    @staticmethod
    def greedy_value(q: torch.Tensor, batch) -> torch.Tensor:
        """max_a Q(s, a) over the legal actions (0 where none is legal): the value a Q(lambda) return bootstraps from."""
        mask = batch.get("action_mask")
        if mask is None:
            return q.max(-1).values
        best = q.masked_fill(mask < 0.5, -torch.inf).max(-1).values
        return torch.where(torch.isfinite(best), best, torch.zeros_like(best))

    def forward_exploration(self, batch):
        with torch.inference_mode():
            q = self.q_values(batch["obs"], fast=True, extra=batch.get("extra_features"))
            # vf_preds: runners record it (and the bootstrap value at piece ends) only for algorithms that ask (PQN)
            return {"action_dist_inputs": self._greedy_logits(q, batch, self.epsilon), "vf_preds": self.greedy_value(q, batch)}

    def forward_inference(self, batch):
        with torch.inference_mode():
            q = self.q_values(batch["obs"], fast=True, extra=batch.get("extra_features"))
            return {"action_dist_inputs": self._greedy_logits(q, batch, 0.0)}
