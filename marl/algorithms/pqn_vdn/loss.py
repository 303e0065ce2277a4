"""PQN-VDN's loss (Gallici et al. 2024; JaxMARL's PQN-VDN baseline): PQN on the team's joint steps, with the
team value the sum of the agents' Q values (VDN, Sunehag et al. 2018), no replay and no target network.

The runners record each agent's V_a(o_a) = max_u Q_a(o_a, u) as it acts. The learner joins a group's per-agent
rows into joint steps (`marl.replay.joint.JointLayout`) and, once per update, computes the team's Q(lambda)
returns over each piece with the team reward r_t (the sum of the agents' rewards):

    Q_tot(s_t, u_t) = sum_a Q_a(o_a,t, u_a,t)
    V_tot(s_t)      = sum_a max_u Q_a(o_a,t, u)
    G_t = r_t + gamma (1 - d_t) [ (1 - lambda) V_tot(s_{t+1}) + lambda G_{t+1} ]
    G_T = r_T + gamma (1 - d_T) V_tot(s_{T+1})                     (the piece's last joint step)
    loss = mean_i 1/2 (Q_tot(s_i, u_i) - G_i)^2

A dead agent's padded place (`alive` 0) adds nothing to Q_tot or V_tot.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.algorithms.live_agents import ALIVE, live_masks, live_mean, only_live
from marl.connectors.learner import compute_gae
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.replay.joint import JointLayout

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.VALUE_TARGETS, ALIVE)


def joint_lambda_returns(batch: SampleBatch, agent_indices: list[int], gamma: float, lambda_: float) -> SampleBatch:
    """Per-agent rows -> joint steps [steps, n, ...] with the team's Q(lambda) returns as `value_targets`."""
    batch = batch.to_numpy()  # the joint layout is laid out in NumPy (a batched runner's rows come as tensors)
    layout = JointLayout(batch, agent_indices)
    per_step, alive = layout.per_step, layout.alive
    terminated = batch[sb.TERMINATEDS].astype(bool)
    team_terminated = (per_step(terminated) | ~alive).all(axis=1)  # every agent still alive ended with the episode
    # The team's piece ends where a live agent's piece ends other than by its own death (a fragment cut, a
    # truncation), or where the episode does.
    piece_end = layout.any_alive(batch[sb.SEGMENT_END].astype(bool) & ~terminated) | team_terminated
    joint = SampleBatch({
        sb.OBS: per_step(batch[sb.OBS]),
        sb.ACTIONS: per_step(batch[sb.ACTIONS]),
        ALIVE: alive,
        sb.REWARDS: per_step(batch[sb.REWARDS].astype(np.float32)).sum(axis=1),
        sb.TERMINATEDS: team_terminated,
        sb.SEGMENT_END: piece_end,
        sb.VF_PREDS: per_step(batch[sb.VF_PREDS].astype(np.float32)).sum(axis=1),  # V_tot(s_t)
        sb.BOOTSTRAP_VALUE: per_step(batch[sb.BOOTSTRAP_VALUE].astype(np.float32)).sum(axis=1),  # V_tot(s_{T+1})
    })
    return compute_gae(joint, gamma, lambda_)


def pqn_vdn_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    q = module.agent_q_values(batch[sb.OBS])  # [B, n, actions]
    alive, _ = live_masks(batch)
    q_taken = only_live(q.gather(2, batch[sb.ACTIONS].long().unsqueeze(-1)).squeeze(-1), alive)  # [B, n]
    q_tot = q_taken.sum(dim=1)  # VDN: the team value is the sum of the agents' values
    returns = batch[sb.VALUE_TARGETS]
    loss = 0.5 * (q_tot - returns).pow(2).mean()
    return loss, {"loss": loss, "q_tot_mean": q_tot.mean().detach(), "agent_q_mean": live_mean(q_taken.detach(), alive),
                  "target_mean": returns.mean(), "td_error_abs_mean": (q_tot - returns).abs().mean().detach()}
