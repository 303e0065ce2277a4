"""SAC's three loss terms (Haarnoja et al. 2018), one per parameter group, and discrete SAC (Christodoulou 2019).

Box actions, a = tanh(u) from the squashed Gaussian (log-probs with the tanh correction):
    y        = R^(n) + gamma^m (1 - terminated) * ( min_j Q_target_j(s', a') - alpha * log pi(a'|s') ),  a' ~ pi(s')
    critic   = sum_j mean_i( w_i * 0.5 (Q_j(s_i, a_i) - y_i)^2 )
    actor    = mean( alpha * log pi(a~|s) - min_j Q_j(s, a~) ),  a~ ~ pi(s) reparameterised
    alpha    = -mean( log_alpha * (log pi(a~|s) + target_entropy) )
Discrete actions: expectations over the policy's probabilities replace the samples (in envs with
action masks the policy's logits are masked, at s by `action_mask` and at s' by `next_action_mask`,
so illegal actions get probability 0 in the actor, the temperature's entropy and the soft value):
    y        = R^(n) + gamma^m (1 - terminated) * sum_a pi(a|s') ( min_j Q_target_j(s', a) - alpha log pi(a|s') )
    actor    = mean( sum_a pi(a|s) (alpha log pi(a|s) - min_j Q_j(s, a)) )
    alpha    = mean( log_alpha * (H(pi(.|s)) - target_entropy) )

Every term works on [B, n, ...] rows of a group's env step: n = 1 for per-agent SAC, the group's
agents for MASAC (centralised critics over the joint observation and action; the team reward;
log pi of the joint action is the sum of the agents' log-probs, and the target entropy is n times
the per-agent one). `weights` are prioritised replay's importance weights; the TD errors go back to
the buffer as priorities. With `critic_state: global_state` the centralised critics read the env's
global state (`state`, and `next_state` in the targets) in place of the joined observations.
Groups whose agents die (`marl.algorithms.live_agents`): a dead agent's action enters the critics as the
zero vector its padded replay rows hold (at s from replay, at s' and in the actor's joint action in place
of its actor's), its log-prob adds nothing to the joint one, and the target entropy counts live agents.
"""

from __future__ import annotations

import contextlib
import math

import torch

from marl.algorithms.live_agents import ALIVE, NEXT_ALIVE, live_count, live_masks, only_live
from marl.data import sample_batch as sb
from marl.modules.squashed import SquashedGaussian
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.REWARDS, sb.NEXT_OBS, sb.TERMINATEDS, DISCOUNTS, REPLAY_WEIGHTS,
                sb.ACTION_MASK, sb.NEXT_ACTION_MASK, sb.STATE, sb.NEXT_STATE, ALIVE, NEXT_ALIVE)
CRITIC_TARGET = "critic"  # the target copy of the critics


def grouped(module, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """obs, next_obs [B, n, obs_dim] (images: [B, n, *image]) and actions ([B, n, act_dim] Box, [B] Discrete) of per-agent or joint rows."""
    obs, next_obs, actions = batch[sb.OBS], batch[sb.NEXT_OBS], batch[sb.ACTIONS]
    if obs.dim() == 1 + module.obs_rank:  # per-agent transitions: a group of one
        obs, next_obs = obs.unsqueeze(1), next_obs.unsqueeze(1)
        if module.continuous:
            actions = actions.reshape(actions.shape[0], 1, -1)
    elif module.continuous:
        actions = actions.reshape(actions.shape[0], actions.shape[1], -1)
    return obs, next_obs, actions


def target_entropy(module, cfg) -> float:
    """Per agent: the configured value, else -act_dim (Box) or `discrete_target_entropy_scale` * log(n_actions)."""
    if cfg.target_entropy is not None:
        return float(cfg.target_entropy)
    if module.continuous:
        return -float(module.act_dim)
    return float(cfg.discrete_target_entropy_scale) * math.log(module.act_dim)


def policy_sample(module, obs: torch.Tensor, alive: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised actions [B, n, act_dim] of the group and the joint log-prob [B] (summed over the live agents);
    a dead agent's action is the zero vector."""
    actions, logp = SquashedGaussian(module.group_actor(obs)).rsample_with_logp()
    return only_live(actions, alive), only_live(logp, alive).sum(-1)


def _discrete_policy(module, obs: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """probs and log-probs [B, actions] of a group of one; illegal actions (mask 0) get probability 0.
    A row whose mask is all zeros (the episode terminated there: its value is not used) keeps a uniform policy."""
    logits = module.apply_action_mask(module.group_actor(obs)[:, 0], {"action_mask": mask})
    logp = torch.log_softmax(logits, dim=-1)
    return logp.exp(), logp


@contextlib.contextmanager
def frozen(parameters):
    """The actor's loss differentiates Q with respect to the action only: the graph built inside
    records no gradient path into the critics' weights (they are another group's), which halves
    the backward pass."""
    params = [p for p in parameters if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def td_terms(qs: list[torch.Tensor], y: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """sum_j mean(w * 0.5 (q_j - y)^2), with the mean |TD error| over critics per row (replay priorities)."""
    loss = sum((weights * 0.5 * (q - y).pow(2)).mean() for q in qs)
    td_error = torch.stack([(q - y).abs() for q in qs]).mean(0).detach()
    return loss, {"loss": loss, "q_mean": qs[0].mean(), "target_mean": y.mean(), "td_error_abs_mean": td_error.mean(), "td_error": td_error}


def critic_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    obs, next_obs, actions = grouped(module, batch)
    target_critics = targets.get(CRITIC_TARGET)
    alpha = module.log_alpha.detach().exp()
    with torch.no_grad():
        if module.continuous:
            next_actions, next_logp = policy_sample(module, next_obs, live_masks(batch)[1])
            q_next = torch.min(torch.stack(module.q_values(next_obs, next_actions, target_critics, batch.get(sb.NEXT_STATE))), 0).values
            v_next = q_next - alpha * next_logp
        else:
            probs, logp = _discrete_policy(module, next_obs, batch.get(sb.NEXT_ACTION_MASK))
            q_next = torch.min(torch.stack(module.q_values(next_obs, None, target_critics)), 0).values
            v_next = (probs * (q_next - alpha * logp)).sum(-1)
        not_done = 1.0 - batch[sb.TERMINATEDS].float()
        y = batch[sb.REWARDS] + batch[DISCOUNTS] * not_done * v_next
    if module.continuous:
        qs = module.q_values(obs, only_live(actions, live_masks(batch)[0]), state=batch.get(sb.STATE))
    else:
        taken = actions.long().reshape(-1, 1)
        qs = [q.gather(1, taken).squeeze(1) for q in module.q_values(obs, None)]
    return td_terms(qs, y, batch[REPLAY_WEIGHTS])


def actor_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    obs, _, _ = grouped(module, batch)
    alpha = module.log_alpha.detach().exp()
    if module.continuous:
        actions, logp = policy_sample(module, obs, live_masks(batch)[0])
        with frozen(module.critic_parameters()):
            q = torch.min(torch.stack(module.q_values(obs, actions, state=batch.get(sb.STATE))), 0).values
        loss = (alpha * logp - q).mean()
        return loss, {"loss": loss, "logp_mean": logp.mean()}
    probs, logp = _discrete_policy(module, obs, batch.get(sb.ACTION_MASK))
    with torch.no_grad():
        q = torch.min(torch.stack(module.q_values(obs, None)), 0).values
    loss = (probs * (alpha * logp - q)).sum(-1).mean()
    return loss, {"loss": loss, "entropy": -(probs * logp).sum(-1).mean().detach()}


def alpha_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    obs, _, _ = grouped(module, batch)
    per_agent = target_entropy(module, cfg)
    alive = live_masks(batch)[0]
    with torch.no_grad():
        if module.continuous:
            _, logp = policy_sample(module, obs, alive)
            entropy = -logp  # a one-sample estimate of the joint entropy
        else:
            probs, logp = _discrete_policy(module, obs, batch.get(sb.ACTION_MASK))
            entropy = -(probs * logp).sum(-1)
    return temperature_loss(module, entropy, live_count(alive, obs.shape[1]) * per_agent)


def temperature_loss(module, entropy: torch.Tensor, target: torch.Tensor | float) -> tuple[torch.Tensor, dict]:
    """SAC's temperature objective: log alpha rises while the policy's `entropy` (no gradient) is below `target`
    (the target entropy of the agents alive), falls while above. SAC, MASAC and HASAC differ only in the entropy."""
    loss = (module.log_alpha * (entropy - target)).mean()
    return loss, {"loss": loss, "alpha": module.log_alpha.detach().exp(), "entropy": entropy.mean()}
