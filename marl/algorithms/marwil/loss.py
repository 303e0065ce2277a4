"""MARWIL (Wang et al. 2018): behaviour cloning weighted by exponentiated advantages.

    R_t  = r_t + gamma * (1 - terminated_t) * (R_{t+1} inside a piece, V(s'_t) at its end)   (Monte Carlo, bootstrapped)
    A_t  = R_t - V(s_t)
    loss = -mean_t( min(exp(beta * A_t / c), max_weight) * log pi(a_t | s_t) )  +  vf_coeff * 0.5 * mean_t (V(s_t) - R_t)^2

c is the root mean square of the batch's advantages (RLlib keeps a moving average of it;
a batch of thousands of rows gives a steady one). beta = 0 is behaviour cloning.
Returns need each agent's rows in order, so MARWIL reads with `offline.shuffle: files`;
the learner shuffles minibatches after `prepare` has computed them.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.connectors.learner import reverse_scan
from marl.data import sample_batch as sb

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.ACTION_MASK, sb.REWARDS, sb.TERMINATEDS, sb.NEXT_OBS, sb.SEGMENT_END)


def prepare_returns(module, tensors: dict, cfg) -> dict:
    """Adds `value_targets` (bootstrapped discounted returns) and `advantages`, with the current value net."""
    with torch.no_grad():
        v = module.forward_train({sb.OBS: tensors[sb.OBS]})["vf_preds"].numpy()
        v_next = module.forward_train({sb.OBS: tensors[sb.NEXT_OBS]})["vf_preds"].numpy()
    rewards = tensors[sb.REWARDS].numpy().astype(np.float32)
    nonterminal = 1.0 - tensors[sb.TERMINATEDS].numpy().astype(np.float32)
    end = tensors[sb.SEGMENT_END].numpy().astype(np.float32)
    # R_t = r_t + gamma * nonterminal * (end ? V(s') : R_{t+1}): the bootstrap enters as a reward at piece ends.
    deltas = rewards + cfg.gamma * nonterminal * end * v_next
    returns = reverse_scan(deltas.astype(np.float32), (cfg.gamma * nonterminal * (1.0 - end)).astype(np.float32))
    out = dict(tensors)
    out[sb.VALUE_TARGETS] = torch.from_numpy(returns)
    out[sb.ADVANTAGES] = torch.from_numpy((returns - v).astype(np.float32))
    return out


def marwil_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    logp = dist.logp(batch[sb.ACTIONS])
    adv = batch[sb.ADVANTAGES]
    scale = adv.pow(2).mean().sqrt().clamp(min=1e-8)
    weights = torch.exp(cfg.beta * adv / scale).clamp(max=cfg.max_weight).detach()
    policy_loss = -(weights * logp).mean()
    vf_loss = 0.5 * (out["vf_preds"] - batch[sb.VALUE_TARGETS]).pow(2).mean()
    total = policy_loss + cfg.vf_coeff * vf_loss
    return total, {"total_loss": total, "policy_loss": policy_loss, "vf_loss": vf_loss,
                   "advantage_weight_mean": weights.mean(), "entropy": dist.entropy().mean()}
