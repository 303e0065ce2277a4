"""PPO's loss (Schulman et al. 2017): clipped surrogate, clipped value loss, entropy bonus."""

from __future__ import annotations

import torch

from marl.data import sample_batch as sb

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.ACTION_LOGP, sb.VF_PREDS, sb.ADVANTAGES, sb.VALUE_TARGETS, sb.ACTION_MASK)


def clipped_surrogate(
    dist, batch: dict[str, torch.Tensor], clip_param: float, reference_logp: torch.Tensor | None = None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """L^CLIP as a loss, plus approx_kl and clip_fraction.

    The ratio is taken against `reference_logp` (the trust region's centre), by default the
    log-probs the batch was sampled with.
    """
    logp = dist.logp(batch[sb.ACTIONS])
    log_ratio = logp - (batch[sb.ACTION_LOGP] if reference_logp is None else reference_logp)
    ratio = log_ratio.exp()
    adv = batch[sb.ADVANTAGES]
    # The pessimistic bound of the unclipped and clipped surrogate.
    surrogate = torch.min(ratio * adv, ratio.clamp(1.0 - clip_param, 1.0 + clip_param) * adv)
    with torch.no_grad():
        approx_kl = ((ratio - 1.0) - log_ratio).mean()  # Schulman's low-variance KL estimator
        clip_fraction = ((ratio - 1.0).abs() > clip_param).float().mean()
    return -surrogate.mean(), {"approx_kl": approx_kl, "clip_fraction": clip_fraction}


def ppo_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    policy_loss, ratio_stats = clipped_surrogate(dist, batch, cfg.clip_param)

    # Value loss, clipped around the sampling-time prediction.
    v, v_old, target = out["vf_preds"], batch[sb.VF_PREDS], batch[sb.VALUE_TARGETS]
    v_clipped = v_old + (v - v_old).clamp(-cfg.vf_clip_param, cfg.vf_clip_param)
    vf_loss = 0.5 * torch.max((v - target).pow(2), (v_clipped - target).pow(2)).mean()

    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, **ratio_stats}
