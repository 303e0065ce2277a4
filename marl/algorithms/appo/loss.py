"""APPO's loss: PPO's clipped surrogate on V-trace advantages (asynchronous PPO).

Advantages and value targets come from V-trace computed once per update
(`vtrace_prepare`), so several epochs of minibatches can reuse them like PPO
reuses GAE.

With asynchronous runners every batch was sampled by a different, stale
behaviour policy mu, so a trust region centred on mu moves with whichever
runner answered last. APPO centres it on a target policy pi_old instead: a
frozen copy of the network, refreshed every `target_network_update_freq`
sampled env steps (the `update_target` node). The ratio is

    r = pi / mu * min(mu / pi_old, 2)  =  pi / max(pi_old, mu / 2)

that is pi / pi_old, except where the behaviour policy was more than twice as
likely as pi_old to take the action: there the ratio is taken against mu / 2,
so a stale sample cannot license a large step. With `use_kl_loss`,
kl_coeff * KL(pi_old || pi) is added to the policy loss.
"""

from __future__ import annotations

import math

import torch

from marl.algorithms.impala.loss import value_fit, vtrace_prepare
from marl.algorithms.ppo.loss import clipped_surrogate
from marl.data import sample_batch as sb
from marl.modules.popart import normalise_value_targets

MAX_BEHAVIOUR_RATIO = 2.0  # cap of mu / pi_old in the ratio


def appo_prepare(module, tensors: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """IMPALA's V-trace targets and advantages, the advantages standardised when `standardize_advantages`."""
    return vtrace_prepare(module, tensors, cfg, standardize_advantages=cfg.standardize_advantages)


def appo_loss(module, batch: dict[str, torch.Tensor], cfg, target=None):
    value_std = normalise_value_targets(module, batch[sb.VALUE_TARGETS])  # PopArt (None without): before the pass
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    stats = {}
    if target is None:  # no target policy: the trust region is centred on the behaviour policy
        policy_loss, ratio_stats = clipped_surrogate(dist, batch, cfg.clip_param)
    else:
        with torch.no_grad():
            target_dist = target.action_dist(target.forward_train(batch)["action_dist_inputs"])
            target_logp = target_dist.logp(batch[sb.ACTIONS])
            # r = pi / max(pi_old, mu / 2): the log-prob of that reference, row by row
            reference_logp = torch.maximum(target_logp, batch[sb.ACTION_LOGP] - math.log(MAX_BEHAVIOUR_RATIO))
        policy_loss, ratio_stats = clipped_surrogate(dist, batch, cfg.clip_param, reference_logp)
        kl = target_dist.kl(dist).mean()
        stats["mean_kl_loss"] = kl.detach()
        if cfg.use_kl_loss:
            policy_loss = policy_loss + cfg.kl_coeff * kl
    value = value_fit(out["vf_preds"], batch[sb.VALUE_TARGETS], value_std)
    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * value["vf_loss"] - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, **value, "entropy": entropy, **ratio_stats, **stats}
