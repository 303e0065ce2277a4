"""A2C's loss (Mnih et al. 2016, synchronous): policy gradient on advantages, value regression, entropy bonus.

    L = -mean(log pi(a|s) * A) + vf_loss_coeff * 0.5 * mean((V(s) - R)^2) - entropy_coeff * mean(H(pi(.|s)))

A and R (`advantages`, `value_targets`) come from GAE over the sampled pieces
(a learner connector); with gae_lambda = 1 they are n-step returns bootstrapped
at each piece's end.
"""

from __future__ import annotations

import torch

from marl.data import sample_batch as sb
from marl.modules.popart import normalise_value_targets

# ACTION_LOGP is recorded only under `env_runners.overlap` (see `behaviour_weighted_pg`).
LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.ADVANTAGES, sb.VALUE_TARGETS, sb.ACTION_MASK, sb.ACTION_LOGP)


def behaviour_weighted_pg(dist, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """-mean(log pi(a|s) * A), or, when the batch holds the behaviour policy's log-probs mu (sampling
    overlapped with learning: the rows come from the weights one update back),
    -mean(pi(a|s) / mu(a|s) * A), whose gradient mean(pi/mu * grad log pi * A) is the importance-sampled
    policy gradient of pi from mu's rows (equal to the first where pi = mu)."""
    logp = dist.logp(batch[sb.ACTIONS])
    adv = batch[sb.ADVANTAGES]
    behaviour = batch.get(sb.ACTION_LOGP)
    if behaviour is None:
        return -(logp * adv).mean(), {}
    ratio = (logp - behaviour).exp()
    return -(ratio * adv).mean(), {"behaviour_ratio_mean": ratio.detach().mean()}


def a2c_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    value_std = normalise_value_targets(module, batch[sb.VALUE_TARGETS])  # PopArt (None without): before the pass
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    policy_loss, ratio_stats = behaviour_weighted_pg(dist, batch)
    vf_loss = 0.5 * (out["vf_preds"] - batch[sb.VALUE_TARGETS]).pow(2).mean() / (value_std or 1.0) ** 2
    if value_std is not None:
        ratio_stats["value_std"] = torch.tensor(value_std)
    entropy = dist.entropy().mean()
    total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy, **ratio_stats}
