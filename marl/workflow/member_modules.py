"""A population member's module rebuilt from saved weights (`MemberFactory`) and its action probabilities at
given observations (an OpenSpiel member's tabular policy). Matches between members: `marl.runners.matches`.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.connectors import build_policy_module
from marl.errors import ConfigError


def action_probabilities(module, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[rows, actions] probabilities of a categorical-policy module at observations `obs` with legal `mask`
    (an OpenSpiel member's tabular policy: every information state at once)."""
    batch = {"obs": torch.as_tensor(np.asarray(obs, np.float32)), "action_mask": torch.as_tensor(np.asarray(mask, np.float32))}
    out = module.forward_inference(batch)
    logits = out.get("action_dist_inputs")
    if logits is None:
        raise ConfigError(f"population members need a categorical policy (a module with 'action_dist_inputs'); "
                          f"{type(module).__name__} returns {sorted(out)}")
    logits = logits.masked_fill(batch["action_mask"] < 0.5, float("-inf"))
    return torch.softmax(logits.double(), dim=-1).numpy()


class MemberFactory:
    """Builds the trained policy's module (the shape every member shares) and loads a member's weights into it."""

    def __init__(self, config, policy: str, spec):
        self.config, self.policy, self.spec = config, policy, spec

    def module(self, weights: dict):
        with torch.random.fork_rng(devices=[]):
            module = build_policy_module(self.config, self.policy, self.spec)
        module.set_state(weights)
        return module.eval()
