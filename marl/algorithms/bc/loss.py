"""Behaviour cloning: maximise the log-likelihood of the recorded actions (Pomerleau 1991).

    loss = -mean_i log pi(a_i | s_i)  -  entropy_coeff * mean_i H(pi(. | s_i))
"""

from __future__ import annotations

import torch

from marl.data import sample_batch as sb

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.ACTION_MASK)


def bc_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    logp = dist.logp(batch[sb.ACTIONS])
    entropy = dist.entropy().mean()
    policy_loss = -logp.mean()
    total = policy_loss - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "entropy": entropy}
