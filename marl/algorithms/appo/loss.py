"""APPO's loss: PPO's clipped surrogate on V-trace advantages (asynchronous PPO).

The ratio is pi_theta / mu against the behaviour policy that sampled the data
(its log-probs travel with the batch); advantages and value targets come from
V-trace computed once per update (`vtrace_prepare`), so several epochs of
minibatches can reuse them like PPO reuses GAE.
"""

from __future__ import annotations

import torch

from marl.algorithms.ppo.loss import clipped_surrogate
from marl.data import sample_batch as sb


def appo_loss(module, batch: dict[str, torch.Tensor], cfg, target=None):
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    policy_loss, ratio_stats = clipped_surrogate(dist, batch, cfg.clip_param)
    vf_loss = 0.5 * (out["vf_preds"] - batch[sb.VALUE_TARGETS]).pow(2).mean()
    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, **ratio_stats}
