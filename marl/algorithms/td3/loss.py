"""TD3's loss terms (Fujimoto et al. 2018): clipped double Q, target policy smoothing, a delayed actor.

    a'     = clip( mu_target(s') + clip(N(0, target_noise), -target_noise_clip, target_noise_clip), -1, 1 )
    y      = R^(n) + gamma^m (1 - terminated) * min_j Q_target_j(s', a')      (one critic: MADDPG)
    critic = sum_j mean_i( w_i * 0.5 (Q_j(s_i, a_i) - y_i)^2 )
    actor  = -mean( Q_1(s, mu(s)) )      on every `policy_delay`-th minibatch step (its group's `every`)

As SAC's, the terms work on [B, n, ...] rows of a group's env step: n = 1 per agent, the group's agents
for MADDPG (centralised critics over the joint observation, or the env's global state, and the joint
action; the team reward). A dead agent of the group (`marl.algorithms.live_agents`) acts the zero vector
its padded replay rows hold, in the targets and in the actor's joint action alike.
"""

from __future__ import annotations

import torch

from marl.algorithms.live_agents import live_masks, only_live
from marl.algorithms.sac.loss import CRITIC_TARGET, frozen, grouped, td_terms
from marl.data import sample_batch as sb
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS

ACTOR_TARGET = "actor"  # the target copy of the actors


def smoothed_target_actions(module, next_obs: torch.Tensor, cfg, target_actors) -> torch.Tensor:
    """The target actors' actions at s' with clipped Gaussian noise (target policy smoothing), in [-1, 1]."""
    actions = torch.tanh(module.group_actor(next_obs, target_actors))
    if cfg.target_noise > 0:
        noise = (torch.randn_like(actions) * cfg.target_noise).clamp(-cfg.target_noise_clip, cfg.target_noise_clip)
        actions = (actions + noise).clamp(-1.0, 1.0)
    return actions


def critic_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    obs, next_obs, actions = grouped(module, batch)
    with torch.no_grad():
        next_actions = only_live(smoothed_target_actions(module, next_obs, cfg, targets.get(ACTOR_TARGET)), live_masks(batch)[1])
        q_next = torch.min(torch.stack(module.q_values(next_obs, next_actions, targets.get(CRITIC_TARGET), batch.get(sb.NEXT_STATE))), 0).values
        not_done = 1.0 - batch[sb.TERMINATEDS].float()
        y = batch[sb.REWARDS] + batch[DISCOUNTS] * not_done * q_next
    return td_terms(module.q_values(obs, only_live(actions, live_masks(batch)[0]), state=batch.get(sb.STATE)), y, batch[REPLAY_WEIGHTS])


def actor_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    obs, _, _ = grouped(module, batch)
    actions = only_live(torch.tanh(module.group_actor(obs)), live_masks(batch)[0])
    with frozen(module.critic_parameters()):
        q = module.q_values(obs, actions, state=batch.get(sb.STATE))[0]
    loss = -q.mean()
    return loss, {"loss": loss, "action_abs_mean": actions.abs().mean().detach()}
