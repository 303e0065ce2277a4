"""Continuous CQL(H) (Kumar et al. 2020) on SAC's learner: SAC's three groups, the critics' loss made conservative.

    critic = SAC's twin-Q TD loss
             + cql_alpha * sum_j mean_i( T * log( 1/K sum_k exp(Q_j(s_i, a_k)/T - log p(a_k)) ) - Q_j(s_i, a_i) )

The a_k are K = 2 * cql_num_actions actions per state: half uniform on [-1, 1]^d (log p = -d log 2),
half from the current policy at s_i (log p = its log-prob, no gradient into the actor). With T = 1 the
first term is an importance-sampled estimate of log of the integral of exp Q(s, a) over the action box,
the soft maximum of Q; pushing it down and Q at the recorded action up keeps Q low on actions the data
never took. The actor and temperature losses are SAC's. Recorded Box actions are the recording actor's
[-1, 1] actions (what SAC/TD3 runs record; the `unsquash_actions` piece maps them to the env's bounds).
"""

from __future__ import annotations

import math

import torch

from marl.algorithms.sac.config import SACParts, group_lr
from marl.algorithms.cql.loss import prepare_transitions
from marl.algorithms.sac.loss import LOSS_COLUMNS as SAC_COLUMNS
from marl.algorithms.sac.loss import critic_loss, grouped, policy_sample
from marl.learners.param_groups import ParamGroup
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS


def soft_max_gap(q_sampled: torch.Tensor, logp_sampled: torch.Tensor, q_data: torch.Tensor, temperature: float) -> torch.Tensor:
    """mean_i( T * (logsumexp_k(q_ik / T - logp_ik) - log K) - q_data_i ) for q_sampled, logp_sampled [B, K]."""
    k = q_sampled.shape[1]
    soft = temperature * (torch.logsumexp(q_sampled / temperature - logp_sampled, dim=1) - math.log(k))
    return (soft - q_data).mean()


def sampled_actions(module, obs: torch.Tensor, num: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """States repeated K = 2 num times [B*K, 1, obs_dim], their actions [B*K, 1, d] (per state: num uniform, then
    num from the policy) and the actions' log-densities [B*K]."""
    b, d = obs.shape[0], module.act_dim
    rep = obs.repeat_interleave(num, dim=0)
    uniform = torch.rand(b * num, 1, d, device=obs.device) * 2 - 1
    with torch.no_grad():
        policy, policy_logp = policy_sample(module, rep)
    actions = torch.cat([uniform.view(b, num, 1, d), policy.view(b, num, 1, d)], dim=1).view(b * 2 * num, 1, d)
    logp = torch.cat([torch.full((b, num), -d * math.log(2.0), device=obs.device), policy_logp.view(b, num)], dim=1)
    return obs.repeat_interleave(2 * num, dim=0), actions, logp.view(-1)


def cql_critic_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    td_loss, stats = critic_loss(module, batch, cfg, targets)
    obs, _, actions = grouped(module, batch)
    b, num = obs.shape[0], int(cfg.cql_num_actions)
    rep_obs, rep_actions, logp = sampled_actions(module, obs, num)
    q_data = module.q_values(obs, actions)
    q_sampled = module.q_values(rep_obs, rep_actions)
    gaps = [soft_max_gap(qs.view(b, 2 * num), logp.view(b, 2 * num), qd, cfg.cql_temperature)
            for qs, qd in zip(q_sampled, q_data)]
    gap = sum(gaps)
    total = td_loss + cfg.cql_alpha * gap
    stats.pop("td_error", None)  # per row (replay priorities): no buffer here
    return total, {**stats, "td_loss": td_loss, "cql_gap": gap / len(gaps), "loss": total}


class ContinuousCQLParts(SACParts):
    loss_columns = tuple(c for c in SAC_COLUMNS if c not in (DISCOUNTS, REPLAY_WEIGHTS))
    per_row_stats = ()
    prepare = staticmethod(prepare_transitions)  # one-step discounts and unit weights (no replay)

    def param_groups(self, cfg):
        critic, actor, alpha = super().param_groups(cfg)
        conservative = ParamGroup("critic", cql_critic_loss, lr=group_lr(cfg, "critic"), eps=cfg.adam_eps,
                                  grad_clip=cfg.grad_clip, params=lambda m: m.critic_parameters())
        return [conservative, actor, alpha]

