r"""MAT's loss (Wen et al., "Multi-Agent Reinforcement Learning is a Sequence Modeling Problem", NeurIPS 2022):
PPO's clipped objective on the decoder's per-agent conditional policies, the value loss on the encoder's values.

For agent $i_m$ at position $m$ (agents in `possible_agents` order), with $\hat o$ the encoder's representations
of all agents' observations and $a^{i_{1:m-1}}$ the actions the earlier agents took at the same env step (teacher
forcing: the team's recorded actions, `team_actions`):

$$r^{i_m}(\theta) = \frac{\pi_\theta(a^{i_m} \mid \hat o^{i_{1:n}}, a^{i_{1:m-1}})}
                           {\pi_{old}(a^{i_m} \mid \hat o^{i_{1:n}}, a^{i_{1:m-1}})}$$

$$L^{Decoder}(\theta) = -\frac{1}{Tn}\sum_{m=1}^{n}\sum_{t=0}^{T-1}
    \min\big(r_t^{i_m}(\theta)\hat A_t,\; \mathrm{clip}(r_t^{i_m}(\theta), 1 \pm \epsilon)\hat A_t\big)$$

$$L^{Encoder}(\phi) = \frac{1}{Tn}\sum_{m=1}^{n}\sum_{t=0}^{T-1}\big(R_t - V_\phi(\hat o_t^{i_m})\big)^2$$

minimised together (the value term weighted by `vf_loss_coeff`, clipped around the sampling-time values as
PPO's; an entropy bonus as PPO's), with $\hat A_t$ GAE over each agent's rewards and values.
"""

from __future__ import annotations

import torch

from marl.algorithms.mappo.loss import LOSS_COLUMNS as MAPPO_LOSS_COLUMNS
from marl.algorithms.mat.module import TEAM_ACTIONS, TEAM_PRESENT
from marl.algorithms.ppo.loss import ppo_loss as mat_loss
from marl.data import sample_batch as sb

LOSS_COLUMNS = MAPPO_LOSS_COLUMNS + (sb.EPS_ID, sb.T)


def team_actions(module, tensors: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """`prepare`: each row's env step's actions of every agent (encoded as the decoder reads them) and which agents
    acted there, so any minibatch of rows can be teacher-forced on its own."""
    keys = torch.stack([tensors[sb.EPS_ID].long(), tensors[sb.T].long()], dim=1)
    _, step = torch.unique(keys, dim=0, return_inverse=True)
    steps, index = int(step.max()) + 1 if len(step) else 0, tensors[sb.AGENT_INDEX].long()
    codes = module.encode_actions(tensors[sb.ACTIONS])
    team = codes.new_zeros(steps, module.num_agents, codes.shape[-1])
    present = torch.zeros(steps, module.num_agents, dtype=torch.float32)
    team[step, index], present[step, index] = codes, 1.0
    return {**tensors, TEAM_ACTIONS: team[step], TEAM_PRESENT: present[step]}


__all__ = ["LOSS_COLUMNS", "mat_loss", "team_actions"]
