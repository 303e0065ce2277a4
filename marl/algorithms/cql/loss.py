"""Discrete CQL (Kumar et al. 2020, CQL(H)): DQN's TD loss plus a penalty on Q values of unseen actions.

    loss = TD(Q(s, a), r + gamma * (1 - terminated) * Q_target(s', argmax_a' Q(s', a')))
           + alpha * mean_i( logsumexp_a Q(s_i, a) - Q(s_i, a_i) )

One-step targets from the recorded next observation; `prepare` adds the discount and
the unit weights DQN's loss reads (replay's n-step discounts and importance weights).
"""

from __future__ import annotations

import torch

from marl.algorithms.dqn.loss import LOSS_COLUMNS as DQN_COLUMNS
from marl.algorithms.dqn.loss import dqn_loss, legal_only
from marl.data import sample_batch as sb
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS

LOSS_COLUMNS = tuple(c for c in DQN_COLUMNS if c not in (DISCOUNTS, REPLAY_WEIGHTS)) + (sb.ACTION_MASK,)


def prepare_transitions(module, tensors: dict, cfg) -> dict:
    n = tensors[sb.OBS].shape[0]
    return {**tensors, DISCOUNTS: torch.full((n,), cfg.gamma), REPLAY_WEIGHTS: torch.ones(n)}


def cql_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    td_loss, stats = dqn_loss(module, batch, cfg, target=target)
    q = legal_only(module.q_values(batch[sb.OBS]), batch.get(sb.ACTION_MASK))
    q_taken = q.gather(1, batch[sb.ACTIONS].long().unsqueeze(1)).squeeze(1)
    gap = (torch.logsumexp(q, dim=1) - q_taken).mean()
    total = td_loss + cfg.cql_alpha * gap
    stats.pop("td_error", None)
    return total, {**stats, "td_loss": td_loss, "cql_gap": gap, "loss": total}
