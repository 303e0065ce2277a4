"""HASAC's actor terms (Zhong et al. 2024, "Maximum Entropy Heterogeneous-Agent Reinforcement Learning", ICLR; HARL):
soft actor-critic with a centralised critic, each agent's own actor updated in turn, in a random order each update.

The critics and the temperature are MASAC's (`marl.algorithms.masac.loss`): twin centralised Q(s, a_1..a_n), target

    y = r + gamma (1 - d) ( min_j Q_target_j(s', a') - alpha sum_i log pi_i(a'_i|o'_i) ),   a'_i ~ pi_i(o'_i)

The actors: for a permutation i_1..i_n drawn each update, agent i_m's actor minimises

    J(pi_{i_m}) = E[ alpha log pi_{i_m}(a_{i_m}|o_{i_m}) - min_j Q_j(s, a_{i_1:m-1}, a_{i_m}, a_{i_m+1:n}) ]
    a_{i_1:m-1} ~ the actors of the agents updated before it (their new weights),
    a_{i_m} ~ pi_{i_m} (reparameterised), a_{i_m+1:n} ~ the actors not yet updated

so each agent improves against its predecessors' new policies: HASAC's sequential scheme, under which the
joint soft objective improves monotonically. The learner steps one parameter group per actor in the drawn
order (`HASACParts.update_order`), so sampling every agent's action from the actors as they stand when agent
i_m's loss runs gives exactly those actions. Discrete actions: the expectation over agent i_m's own actions
(discrete SAC), the others' as one-hot samples:

    J(pi_{i_m}) = E[ sum_a pi_{i_m}(a|o) ( alpha log pi_{i_m}(a|o) - min_j Q_j(s, a_{-i_m}, a_{i_m} = a) ) ]

A dead agent (`marl.algorithms.live_agents`) acts with the zero vector, and rows where agent i_m is dead add
nothing to its loss.
"""

from __future__ import annotations

import torch
from torch import nn

from marl.algorithms.live_agents import live_masks, only_live
from marl.algorithms.masac.loss import joint_policy, sampled_one_hots
from marl.algorithms.sac.loss import frozen, grouped
from marl.data import sample_batch as sb
from marl.modules.squashed import SquashedGaussian


def own_actor(module, obs: torch.Tensor, agent: int) -> torch.Tensor:
    """Raw outputs [B, out] of agent `agent`'s actor on its observations (obs [B, n, ...]), with gradients."""
    places = torch.full((obs.shape[0],), agent, dtype=torch.long, device=obs.device)
    return module.actor_rows(obs[:, agent], places, nn.ModuleList([module.actors[agent]]))


def _live_mean(x: torch.Tensor, alive_k: torch.Tensor | None) -> torch.Tensor:
    """Mean of per-row `x` [B] over the rows where the agent is alive."""
    if alive_k is None:
        return x.mean()
    return (x * alive_k).sum() / alive_k.sum().clamp(min=1)


def actor_loss(module, batch: dict, cfg, agent: int) -> tuple[torch.Tensor, dict]:
    """J(pi_agent) with every other agent's action drawn from its actor as it stands now (see the module doc)."""
    obs, _, _ = grouped(module, batch)
    alpha = module.log_alpha.detach().exp()
    alive = live_masks(batch)[0]
    alive_k = None if alive is None else alive[:, agent].float()
    state = batch.get(sb.STATE)
    if module.continuous:
        with torch.no_grad():
            others, _ = SquashedGaussian(module.group_actor(obs)).rsample_with_logp()
        own, logp = SquashedGaussian(own_actor(module, obs, agent)).rsample_with_logp()
        joint = torch.cat([others[:, :agent], own[:, None], others[:, agent + 1:]], dim=1)
        with frozen(module.critic_parameters()):
            q = torch.min(torch.stack(module.q_values(obs, only_live(joint, alive), state=state)), 0).values
        loss = _live_mean(alpha * logp - q, alive_k)
        return loss, {"loss": loss, "logp_mean": _live_mean(logp.detach(), alive_k)}
    with torch.no_grad():
        probs_all, _ = joint_policy(module, obs)
        others = only_live(sampled_one_hots(probs_all), alive)  # [B, n, actions]
        q = own_action_values(module, obs, others, agent, state)  # [B, actions]
    logp = torch.log_softmax(own_actor(module, obs, agent), dim=-1)
    probs = logp.exp()
    loss = _live_mean((probs * (alpha * logp - q)).sum(-1), alive_k)
    return loss, {"loss": loss, "entropy": _live_mean(-(probs * logp).sum(-1).detach(), alive_k)}


def own_action_values(module, obs: torch.Tensor, joint: torch.Tensor, agent: int, state=None) -> torch.Tensor:
    """min_j Q_j(s, a_-agent, a_agent = a) [B, actions] for each of the agent's actions (one critic pass)."""
    b, n, a = joint.shape
    rows = joint[:, None].expand(b, a, n, a).clone()  # [B, own action, agents, actions]
    rows[:, :, agent, :] = torch.eye(a, device=joint.device)

    def tiled(x):
        return None if x is None else x[:, None].expand(b, a, *x.shape[1:]).reshape(b * a, *x.shape[1:])

    qs = module.q_values(tiled(obs), rows.reshape(b * a, n, a), None, tiled(state))
    return torch.min(torch.stack(qs), 0).values.view(b, a)
