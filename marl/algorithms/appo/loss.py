"""APPO's loss: PPO's clipped surrogate on V-trace advantages (asynchronous PPO).

The ratio is pi_theta / mu against the behaviour policy that sampled the data
(its log-probs travel with the batch); advantages and value targets come from
V-trace computed once per update (`vtrace_prepare`), so several epochs of
minibatches can reuse them like PPO reuses GAE.
"""

from __future__ import annotations

import torch

from marl.data import sample_batch as sb


def appo_loss(module, batch: dict[str, torch.Tensor], cfg, target=None):
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    logp = dist.logp(batch[sb.ACTIONS])
    log_ratio = logp - batch[sb.ACTION_LOGP]
    ratio = log_ratio.exp()
    adv = batch[sb.ADVANTAGES]
    surrogate = torch.min(ratio * adv, ratio.clamp(1.0 - cfg.clip_param, 1.0 + cfg.clip_param) * adv)
    policy_loss = -surrogate.mean()
    vf_loss = 0.5 * (out["vf_preds"] - batch[sb.VALUE_TARGETS]).pow(2).mean()
    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > cfg.clip_param).float().mean()
    return total, {
        "total_loss": total,
        "policy_loss": policy_loss,
        "vf_loss": vf_loss,
        "entropy": entropy,
        "approx_kl": approx_kl,
        "clip_fraction": clip_fraction,
    }
