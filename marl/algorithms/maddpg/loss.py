"""MADDPG's loss terms: TD3's (`marl.algorithms.td3.loss`) for Box actions; for Discrete actions, the
Gumbel-softmax form of Lowe et al. 2017 (as BenchMARL's), the critic reading every agent's one-hot action.

Each actor outputs logits; it acts by sampling their categorical (the Gumbel-max sample, argmax at inference).
    a'     = onehot( argmax(mu_target(s') + g) ),  g ~ Gumbel(0, 1)     (a sample of the target actors' policies)
    y      = R^(n) + gamma^m (1 - terminated) * min_j Q_target_j(s', a')
    critic = sum_j mean( w * 0.5 (Q_j(s, onehot(a)) - y)^2 )
    actor  = -mean( Q_1(s, a~) ) + LOGIT_L2 * mean( mu(s)^2 ),   a~ = straight-through Gumbel-softmax of mu(s)
The straight-through relaxation: the forward value is the hard one-hot of argmax(logits + g) (the critic only
ever saw one-hots), the gradient is that of softmax((logits + g) / T), T = `gumbel_temperature`. A lower T makes
the relaxed vector closer to the one-hot (less biased, higher-variance gradients); T = 1 is the usual choice
(Jang et al. 2017; BenchMARL's default). Every agent acts with its current actor in the joint action, as for Box.
A dead agent (`marl.algorithms.live_agents`) reads as the zero vector in every joint action the critic sees
(replayed, the target's, the actor's), so its actor gets no gradient from its padded rows, nor its logits a penalty.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from marl.algorithms.live_agents import live_masks, live_mean, only_live
from marl.algorithms.sac.loss import CRITIC_TARGET, frozen, grouped, td_terms
from marl.algorithms.td3 import loss as td3
from marl.algorithms.td3.loss import ACTOR_TARGET
from marl.data import sample_batch as sb
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS

# The original MADDPG's penalty on the actor's logits: they stay small, so its policy (which is also its
# exploration) keeps sampling other actions and the relaxation's gradients do not vanish in a saturated softmax.
LOGIT_L2 = 1e-3


def gumbel_one_hots(logits: torch.Tensor) -> torch.Tensor:
    """Hard samples of the logits' categoricals [B, n, actions], as one-hots (no gradient)."""
    return F.one_hot(torch.argmax(logits - torch.empty_like(logits).exponential_().log(), -1), logits.shape[-1]).float()


def critic_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    if module.continuous:
        return td3.critic_loss(module, batch, cfg, targets)
    obs, next_obs, actions = grouped(module, batch)
    alive, next_alive = live_masks(batch)
    with torch.no_grad():
        next_actions = only_live(gumbel_one_hots(module.group_actor(next_obs, targets.get(ACTOR_TARGET))), next_alive)
        qs_next = module.q_values(next_obs, next_actions, targets.get(CRITIC_TARGET), batch.get(sb.NEXT_STATE))
        not_done = 1.0 - batch[sb.TERMINATEDS].float()
        y = batch[sb.REWARDS] + batch[DISCOUNTS] * not_done * torch.min(torch.stack(qs_next), 0).values
    qs = module.q_values(obs, only_live(module.one_hot_actions(actions), alive), state=batch.get(sb.STATE))
    return td_terms(qs, y, batch[REPLAY_WEIGHTS])


def actor_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    if module.continuous:
        return td3.actor_loss(module, batch, cfg, targets)
    obs, _, _ = grouped(module, batch)
    alive = live_masks(batch)[0]
    logits = module.group_actor(obs)
    actions = only_live(F.gumbel_softmax(logits, tau=float(cfg.gumbel_temperature), hard=True), alive)
    with frozen(module.critic_parameters()):
        q = module.q_values(obs, actions, state=batch.get(sb.STATE))[0]
    loss = -q.mean() + LOGIT_L2 * live_mean(logits.pow(2).mean(-1), alive)
    entropy = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1).mean().detach()
    return loss, {"loss": loss, "q_mean": q.mean().detach(), "entropy": entropy}
