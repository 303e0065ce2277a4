r"""HAPPO's loss (Kuba et al., "Trust Region Policy Optimisation in Multi-Agent Reinforcement Learning",
ICLR 2022; Zhong, Kuba et al., "Heterogeneous-Agent Reinforcement Learning", JMLR 2024).

Agents are updated one after another in an order $i_{1:n}$ drawn anew each iteration. Agent $i_m$ maximises PPO's
clipped surrogate with its advantage weighted by how much the agents updated before it changed their joint action's
probability on the same batch:

$$M^{i_{1:m}}(s, \mathbf{a}) = \frac{\bar\pi^{i_{1:m-1}}(\mathbf{a}^{i_{1:m-1}} \mid s)}
                                     {\pi_{old}^{i_{1:m-1}}(\mathbf{a}^{i_{1:m-1}} \mid s)} \, \hat A(s, \mathbf{a})
  = \Big(\prod_{j<m} r^{i_j}\Big) \hat A(s, \mathbf{a}), \qquad
  r^{i}(\theta) = \frac{\pi_\theta^{i}(a^{i} \mid o^{i})}{\pi_{old}^{i}(a^{i} \mid o^{i})}$$

$$L^{i_m}(\theta) = \mathbb{E}\Big[\min\big(r^{i_m}(\theta)\, M^{i_{1:m}},\;
  \mathrm{clip}(r^{i_m}(\theta), 1 \pm \epsilon)\, M^{i_{1:m}}\big)\Big]$$

where $\bar\pi^{i_j}$ is agent $i_j$'s policy after its update. The factor $\prod_{j<m} r^{i_j}$ is positive and
fixed during agent $i_m$'s update, so the loss is PPO's on advantages scaled by it (`FACTOR`, one value per row,
made by the `learn_in_turn` nodes of the graph, `marl.algorithms.happo.turns`). The value loss is MAPPO's
(a centralised critic over the global state). After the update, `new_log_probs` gives the rows'
$\log \bar\pi^{i_m}(a^{i_m} \mid o^{i_m})$, from which the next agent's factor is made.
"""

from __future__ import annotations

import torch

from marl.algorithms.mappo.loss import LOSS_COLUMNS as MAPPO_LOSS_COLUMNS
from marl.algorithms.ppo.loss import ppo_loss
from marl.data import sample_batch as sb

FACTOR = "happo_factor"  # prod_{j<m} r^{i_j} at the row's env step: the earlier-updated agents' ratios
NEW_LOGP = "happo_new_logp"  # log pi_new(a|o) of each row after its policy's update (the learner's `finish` pass)
LOSS_COLUMNS = MAPPO_LOSS_COLUMNS + (FACTOR,)


def weighted_advantages(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch with its advantages scaled by the factor (M = factor x A); a batch without one is refused."""
    factor = batch.get(FACTOR)
    if factor is None:
        raise ValueError(
            f"the HAPPO/HATRPO loss needs column '{FACTOR}', which the graph's learn_in_turn nodes add; a plain "
            "learn node would train every agent without the earlier agents' ratios (use the algorithm's default workflow)"
        )
    return {**batch, sb.ADVANTAGES: batch[sb.ADVANTAGES] * factor}


def happo_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    total, stats = ppo_loss(module, weighted_advantages(batch), cfg)
    stats["factor_mean"] = batch[FACTOR].mean()
    return total, stats


def new_log_probs(module, tensors: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """`finish`: log pi_new(a|o) of every row, with the weights the update ended with."""
    with torch.no_grad():
        out = module.forward_train(tensors)
        return {NEW_LOGP: module.action_dist(out["action_dist_inputs"]).logp(tensors[sb.ACTIONS])}
