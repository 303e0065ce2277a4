"""RandomPolicy: uniform over the legal actions, no parameters; a baseline opponent (never trained)."""

from __future__ import annotations

import torch

from marl.modules.rl_module import RLModule


class RandomPolicy(RLModule):
    def forward_train(self, batch):
        obs = batch["obs"]
        logits = torch.zeros(obs.shape[0], self.action_dim, dtype=obs.dtype)
        return {"action_dist_inputs": self.apply_action_mask(logits, batch), "vf_preds": torch.zeros(obs.shape[0])}

    def forward_inference(self, batch):
        # Greedy acting takes the argmax of the logits; a random baseline must stay random even then,
        # so the logits single out one uniformly drawn legal action.
        out = self.forward_train(batch)
        choice = torch.multinomial(out["action_dist_inputs"].softmax(-1), 1).squeeze(-1)
        picked = torch.nn.functional.one_hot(choice, self.action_dim).bool()
        out["action_dist_inputs"] = torch.where(picked, 0.0, -1e9).to(out["action_dist_inputs"].dtype)
        return out
