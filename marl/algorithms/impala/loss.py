"""IMPALA's loss (Espeholt et al. 2018): V-trace actor-critic.

`prepare` runs once per update, before any gradient step: it evaluates the
current network on the whole batch (no gradients) and adds the V-trace
targets `value_targets` (vs) and policy-gradient advantages `advantages`.
The loss is then

    -mean(A_t * log pi(a_t|x_t)) + vf_coeff * 0.5 * mean((vs_t - V(x_t))^2) - ent_coeff * H(pi)

`vf_explained_var` (1 - Var(vs - V) / Var(vs)) says how much of the targets the value function
explains: near 0, the targets vary with where a row sits in its fragment (the bootstrap is far
from the discounted return), not with the state, and so do the advantages.
"""

from __future__ import annotations

import torch

from marl.connectors import standardize, vtrace
from marl.data import sample_batch as sb
from marl.modules.popart import normalise_value_targets

LOSS_COLUMNS = (
    sb.OBS, sb.ACTIONS, sb.ACTION_LOGP, sb.REWARDS, sb.TERMINATEDS, sb.SEGMENT_END, sb.BOOTSTRAP_VALUE, sb.ACTION_MASK,
)


def vtrace_prepare(
    module, tensors: dict[str, torch.Tensor], cfg, standardize_advantages: bool = False
) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = module.forward_train(tensors)
        target_logp = module.action_dist(out["action_dist_inputs"]).logp(tensors[sb.ACTIONS])
    vs, adv = vtrace(  # on the learner's device, in torch
        tensors[sb.ACTION_LOGP],
        target_logp,
        tensors[sb.REWARDS],
        out["vf_preds"],
        tensors[sb.BOOTSTRAP_VALUE],
        tensors[sb.TERMINATEDS],
        tensors[sb.SEGMENT_END],
        cfg.gamma,
        rho_bar=cfg.vtrace_clip_rho_threshold,
        c_bar=cfg.vtrace_clip_c_threshold,
        pg_rho_bar=cfg.vtrace_clip_pg_rho_threshold,
        lambda_=cfg.vtrace_lambda,
    )
    if standardize_advantages:
        adv = standardize(adv)
    tensors = dict(tensors)
    tensors[sb.VALUE_TARGETS] = vs
    tensors[sb.ADVANTAGES] = adv
    return tensors


def value_fit(vf_preds: torch.Tensor, value_targets: torch.Tensor, value_std: float | None = None) -> dict[str, torch.Tensor]:
    """The value loss 0.5 * mean((V - vs)^2) (divided by PopArt's std^2 where given) and, without gradient, the
    share of Var(vs) that V explains."""
    error = vf_preds - value_targets
    with torch.no_grad():
        explained = 1.0 - error.var(unbiased=False) / value_targets.var(unbiased=False).clamp(min=1e-8)
    stats = {"vf_loss": 0.5 * error.pow(2).mean() / (value_std or 1.0) ** 2, "vf_explained_var": explained}
    if value_std is not None:
        stats["value_std"] = torch.tensor(value_std)
    return stats


def impala_loss(module, batch: dict[str, torch.Tensor], cfg, target=None):
    value_std = normalise_value_targets(module, batch[sb.VALUE_TARGETS])  # PopArt (None without): before the pass
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    logp = dist.logp(batch[sb.ACTIONS])
    policy_loss = -(batch[sb.ADVANTAGES] * logp).mean()
    value = value_fit(out["vf_preds"], batch[sb.VALUE_TARGETS], value_std)
    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * value["vf_loss"] - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, **value, "entropy": entropy}
