"""PQN's loss (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"): Q-learning with no replay
buffer and no target network, on the fragment just sampled by many parallel envs.

The runners record, for each row, V(s_t) = max_a Q(s_t, a) with the network that acted (the learner's weights at
the start of the update: sampling is synchronous) and, where a trajectory piece is cut or truncated,
V(s_{t+1}). Once per update, before the epochs, the Q(lambda) returns over each piece are

    G_t = r_t + gamma (1 - d_t) [ (1 - lambda) max_a Q(s_{t+1}, a) + lambda G_{t+1} ]
    G_T = r_T + gamma (1 - d_T) max_a Q(s_{T+1}, a)                 (the piece's last row: cut, truncated or ended)

which is the TD(lambda) return of GAE with V = max_a Q (`marl.connectors.learner.compute_gae`'s value targets:
G_t = A_t + V(s_t)). The network then regresses on them over several epochs of minibatches,

    loss = mean_i 1/2 (Q(s_i, a_i) - G_i)^2

with no target copy: LayerNorm in the Q network (`model.layer_norm`) is what keeps bootstrapping from the online
network stable. Exploration is epsilon-greedy on a schedule of env steps (`training.epsilon`).
"""

from __future__ import annotations

import torch

from marl.connectors.learner import compute_gae
from marl.data import sample_batch as sb

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.VALUE_TARGETS)


def q_lambda_returns(batch, gamma: float, lambda_: float):
    """`value_targets` = the Q(lambda) returns G_t of every row (the module recorded V = max_a Q as `vf_preds`)."""
    return compute_gae(batch, gamma, lambda_)


def pqn_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    q = module.forward_train(batch)["q_values"]
    q_taken = q.gather(1, batch[sb.ACTIONS].long().unsqueeze(1)).squeeze(1)
    returns = batch[sb.VALUE_TARGETS]
    loss = 0.5 * (q_taken - returns).pow(2).mean()
    return loss, {"loss": loss, "q_mean": q_taken.mean().detach(), "target_mean": returns.mean(),
                  "td_error_abs_mean": (q_taken - returns).abs().mean().detach()}
