"""RandomPolicy: uniform over the legal actions, no parameters; a baseline opponent (never trained)."""

from __future__ import annotations

import torch

from marl.modules.rl_module import RLModule


class RandomPolicy(RLModule):
    greedy_is_sampled = True  # greedy or not, it draws uniformly among the legal actions

    def forward_train(self, batch):
        obs = batch["obs"]
        logits = torch.zeros(obs.shape[0], self.action_dim, dtype=obs.dtype)
        return {"action_dist_inputs": self.apply_action_mask(logits, batch), "vf_preds": torch.zeros(obs.shape[0])}
