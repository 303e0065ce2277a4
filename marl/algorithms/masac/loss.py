"""MASAC's loss terms: SAC's (`marl.algorithms.sac.loss`) for Box actions; for Discrete actions, discrete SAC's
expected-value form over each agent's own action, with the group's critic reading every agent's one-hot action.

The critic is one joint Q(s, a_1..a_n) (a_j one-hot), learnt from the replayed joint actions. Agent i's Q over
its own actions given the others' is that critic at each own action with the others' held at one-hot samples
of their current policies:
    Q_i(s, a) = min_j Q_j(s, a_-i ~ pi_-i(s), a_i = a)                                  [B, n, actions]
    y      = R^(n) + gamma^m (1 - terminated) * ( mean_i sum_a pi_i(a|s') Q_target_i(s', a) + alpha sum_i H(pi_i(.|s')) )
    critic = sum_j mean( w * 0.5 (Q_j(s, onehot(a)) - y)^2 )
    actor  = mean( sum_i sum_a pi_i(a|s) (alpha log pi_i(a|s) - Q_i(s, a)) )
    alpha  = mean( log_alpha * (sum_i H(pi_i(.|s)) - n * target_entropy) )
Why this form and not a Gumbel-softmax relaxation (MADDPG's, `marl.algorithms.maddpg.loss`): the sum over each
agent's own actions is exact, so the actor's gradient has neither the relaxation's bias nor a temperature to
tune, and the entropy (the temperature's loss, the soft value) is exact rather than a one-sample log-prob; it
costs n x actions critic rows per replayed row (3 x 5 on simple_spread), one batched pass. Each mean_i term is
an unbiased estimate of the soft value E_pi[Q]; averaging the agents' lowers its variance.
Joint rows keep no action masks: the policies here act unmasked (masks apply when acting only).
Dead agents (`marl.algorithms.live_agents`): their one-hot is the zero vector wherever the critic reads it,
and the sums and means over agents (mean_i, sum_i, n) run over the live ones: at s' in the target, at s in
the actor's and the temperature's losses.
"""

from __future__ import annotations

import torch

from marl.algorithms.live_agents import live_count, live_masks, live_mean, only_live
from marl.algorithms.sac import loss as sac
from marl.algorithms.sac.loss import CRITIC_TARGET, grouped, td_terms
from marl.data import sample_batch as sb
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS


def joint_policy(module, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """probs and log-probs [B, n, actions] of the group's agents at obs [B, n, ...]."""
    logp = torch.log_softmax(module.group_actor(obs), dim=-1)
    return logp.exp(), logp


def sampled_one_hots(probs: torch.Tensor) -> torch.Tensor:
    """One action per agent drawn from `probs` [B, n, actions], as one-hots of the same shape."""
    flat = probs.detach().reshape(-1, probs.shape[-1])
    return torch.nn.functional.one_hot(torch.multinomial(flat, 1).squeeze(-1), probs.shape[-1]).float().view_as(probs)


def own_action_values(module, obs: torch.Tensor, joint: torch.Tensor, critics=None, state=None) -> torch.Tensor:
    """Q_i(s, a) [B, n, actions]: the critics' minimum at the joint one-hot action `joint` [B, n, actions] with
    agent i's action replaced by each of its actions in turn (one pass over B * n * actions rows)."""
    b, n, a = joint.shape
    rows = joint[:, None, None].expand(b, n, a, n, a).clone()  # [B, i, own action, agents, actions]
    agents = torch.arange(n)
    rows[:, agents, :, agents, :] = torch.eye(a, device=joint.device)  # agent i's slot: each own action
    repeat = n * a

    def tiled(x):
        return None if x is None else x[:, None].expand(b, repeat, *x.shape[1:]).reshape(b * repeat, *x.shape[1:])

    qs = module.q_values(tiled(obs), rows.reshape(b * repeat, n, a), critics, tiled(state))
    return torch.min(torch.stack(qs), 0).values.view(b, n, a)


def critic_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    if module.continuous:
        return sac.critic_loss(module, batch, cfg, targets)
    obs, next_obs, actions = grouped(module, batch)
    alpha = module.log_alpha.detach().exp()
    alive, next_alive = live_masks(batch)
    with torch.no_grad():
        probs, logp = joint_policy(module, next_obs)
        others = only_live(sampled_one_hots(probs), next_alive)
        q_next = own_action_values(module, next_obs, others, targets.get(CRITIC_TARGET), batch.get(sb.NEXT_STATE))
        entropy = only_live(-(probs * logp).sum(-1), next_alive).sum(-1)
        soft_q = only_live((probs * q_next).sum(-1), next_alive).sum(-1) / live_count(next_alive, obs.shape[1])
        v_next = soft_q + alpha * entropy
        not_done = 1.0 - batch[sb.TERMINATEDS].float()
        y = batch[sb.REWARDS] + batch[DISCOUNTS] * not_done * v_next
    qs = module.q_values(obs, only_live(module.one_hot_actions(actions), alive), state=batch.get(sb.STATE))
    return td_terms(qs, y, batch[REPLAY_WEIGHTS])


def actor_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    if module.continuous:
        return sac.actor_loss(module, batch, cfg, targets)
    obs, _, _ = grouped(module, batch)
    alpha = module.log_alpha.detach().exp()
    alive = live_masks(batch)[0]
    probs, logp = joint_policy(module, obs)
    with torch.no_grad():  # the gradient flows through the probabilities only
        q = own_action_values(module, obs, only_live(sampled_one_hots(probs), alive), state=batch.get(sb.STATE))
    loss = only_live((probs * (alpha * logp - q)).sum(-1), alive).sum(-1).mean()
    return loss, {"loss": loss, "entropy": live_mean(-(probs * logp).sum(-1), alive).detach()}


def alpha_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    if module.continuous:
        return sac.alpha_loss(module, batch, cfg, targets)
    obs, _, _ = grouped(module, batch)
    alive = live_masks(batch)[0]
    with torch.no_grad():
        probs, logp = joint_policy(module, obs)
        entropy = only_live(-(probs * logp).sum(-1), alive).sum(-1)
    return sac.temperature_loss(module, entropy, live_count(alive, obs.shape[1]) * sac.target_entropy(module, cfg))
