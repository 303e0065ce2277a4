"""PPO's loss (Schulman et al. 2017): clipped surrogate, clipped value loss, entropy bonus.

Sampling overlapped with learning (`env_runners.overlap`) trains on rows of the weights one
update back (the behaviour policy mu), so the ratio to mu starts the update already away from 1
and the clip would cut most of the update short. The decoupled objective (Hilton et al. 2021,
"Batch size-invariance for policy optimization") separates the two roles of mu: the trust region
is centred on the proximal policy pi_prox, the learner's weights at the start of the update
(`proximal_log_probs`, computed once before the epochs), and each row is importance-weighted by
pi_prox / mu (capped at MAX_BEHAVIOUR_WEIGHT), which keeps the gradient that of pi's objective on
mu's rows. Where pi_prox = mu (synchronous sampling) it is PPO's loss.
"""

from __future__ import annotations

import torch

from marl.data import sample_batch as sb
from marl.modules.popart import normalise_value_targets

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.ACTION_LOGP, sb.VF_PREDS, sb.ADVANTAGES, sb.VALUE_TARGETS, sb.ACTION_MASK)
PROX_LOGP = "prox_logp"  # log pi_prox(a|s): the learner's policy at the start of the update (overlap only)
MAX_BEHAVIOUR_WEIGHT = 2.0  # cap of pi_prox / mu, the importance weight of a lagged row


def proximal_log_probs(module, tensors: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """`prepare` under overlap: log pi_prox(a|s) of every row with the weights the update starts from."""
    with torch.no_grad():
        out = module.forward_train(tensors)
        tensors[PROX_LOGP] = module.action_dist(out["action_dist_inputs"]).logp(tensors[sb.ACTIONS])
    return tensors


def clipped_surrogate(
    dist, batch: dict[str, torch.Tensor], clip_param: float, reference_logp: torch.Tensor | None = None,
    row_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """L^CLIP as a loss, plus approx_kl and clip_fraction.

    The ratio is taken against `reference_logp` (the trust region's centre), by default the
    log-probs the batch was sampled with; `row_weights` (importance weights) scale each row's term.
    """
    logp = dist.logp(batch[sb.ACTIONS])
    log_ratio = logp - (batch[sb.ACTION_LOGP] if reference_logp is None else reference_logp)
    ratio = log_ratio.exp()
    adv = batch[sb.ADVANTAGES]
    # The pessimistic bound of the unclipped and clipped surrogate.
    surrogate = torch.min(ratio * adv, ratio.clamp(1.0 - clip_param, 1.0 + clip_param) * adv)
    if row_weights is not None:
        surrogate = surrogate * row_weights
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()  # Schulman's low-variance KL estimator
        clip_fraction = ((ratio - 1.0).abs() > clip_param).float().mean()
    return -surrogate.mean(), {"approx_kl": approx_kl, "clip_fraction": clip_fraction}


def ppo_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    value_std = normalise_value_targets(module, batch[sb.VALUE_TARGETS])  # PopArt (None without): before the pass
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    prox = batch.get(PROX_LOGP)
    if prox is None:
        policy_loss, ratio_stats = clipped_surrogate(dist, batch, cfg.clip_param)
    else:  # decoupled (overlap): trust region around pi_prox, rows weighted by pi_prox / mu
        weights = (prox - batch[sb.ACTION_LOGP]).exp().clamp(max=MAX_BEHAVIOUR_WEIGHT)
        policy_loss, ratio_stats = clipped_surrogate(dist, batch, cfg.clip_param, prox, weights)
        ratio_stats["behaviour_weight_mean"] = weights.mean()

    # Value loss, clipped around the sampling-time prediction; with PopArt both in units of the targets' std.
    v, v_old, target = out["vf_preds"], batch[sb.VF_PREDS], batch[sb.VALUE_TARGETS]
    scale = value_std or 1.0
    v_clipped = v_old + (v - v_old).clamp(-cfg.vf_clip_param * scale, cfg.vf_clip_param * scale)
    vf_loss = 0.5 * torch.max((v - target).pow(2), (v_clipped - target).pow(2)).mean() / scale**2
    if value_std is not None:
        ratio_stats["value_std"] = torch.tensor(value_std)

    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, **ratio_stats}
