"""IMPALA's loss (Espeholt et al. 2018): V-trace actor-critic.

`prepare` runs once per update, before any gradient step: it evaluates the
current network on the whole batch (no gradients) and adds the V-trace
targets `value_targets` (vs) and policy-gradient advantages `advantages`.
The loss is then

    -mean(A_t * log pi(a_t|x_t)) + vf_coeff * 0.5 * mean((vs_t - V(x_t))^2) - ent_coeff * H(pi)
"""

from __future__ import annotations

import torch

from marl.connectors import standardize, vtrace
from marl.data import sample_batch as sb

LOSS_COLUMNS = (
    sb.OBS, sb.ACTIONS, sb.ACTION_LOGP, sb.REWARDS, sb.TERMINATEDS, sb.SEGMENT_END, sb.BOOTSTRAP_VALUE, sb.ACTION_MASK,
)


def vtrace_prepare(
    module, tensors: dict[str, torch.Tensor], cfg, standardize_advantages: bool = False
) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = module.forward_train(tensors)
        target_logp = module.action_dist(out["action_dist_inputs"]).logp(tensors[sb.ACTIONS])
    vs, adv = vtrace(
        tensors[sb.ACTION_LOGP].numpy(),
        target_logp.numpy(),
        tensors[sb.REWARDS].numpy(),
        out["vf_preds"].numpy(),
        tensors[sb.BOOTSTRAP_VALUE].numpy(),
        tensors[sb.TERMINATEDS].numpy(),
        tensors[sb.SEGMENT_END].numpy(),
        cfg.gamma,
        rho_bar=cfg.vtrace_clip_rho_threshold,
        c_bar=cfg.vtrace_clip_c_threshold,
        pg_rho_bar=cfg.vtrace_clip_pg_rho_threshold,
        lambda_=cfg.vtrace_lambda,
    )
    if standardize_advantages:
        adv = standardize(adv)
    tensors = dict(tensors)
    tensors[sb.VALUE_TARGETS] = torch.from_numpy(vs)
    tensors[sb.ADVANTAGES] = torch.from_numpy(adv)
    return tensors


def impala_loss(module, batch: dict[str, torch.Tensor], cfg, target=None):
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    logp = dist.logp(batch[sb.ACTIONS])
    policy_loss = -(batch[sb.ADVANTAGES] * logp).mean()
    vf_loss = 0.5 * (out["vf_preds"] - batch[sb.VALUE_TARGETS]).pow(2).mean()
    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy}
