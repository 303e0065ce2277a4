"""REINFORCE (Williams 1992) with returns-to-go: no critic, the batch mean of the returns is the baseline.

    L = -mean(log pi(a_t|s_t) * G_t) - entropy_coeff * mean(H(pi(.|s_t))),   G_t = sum_k gamma^k r_{t+k}

G_t runs to the end of the row's trajectory piece (its episode's end under
batch_mode complete_episodes, PG's default); `returns_to_go` writes it to the
`advantages` column, standardised over the batch unless
`training.standardize_returns` is false.
"""

from __future__ import annotations

import torch

from marl.algorithms.a2c.loss import behaviour_weighted_pg
from marl.connectors import reverse_scan
from marl.data import array_ops as ops
from marl.data import sample_batch as sb

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.ADVANTAGES, sb.ACTION_MASK, sb.ACTION_LOGP)  # log-probs: only under overlap


def returns_to_go(batch: sb.SampleBatch, gamma: float) -> sb.SampleBatch:
    """`advantages` = discounted sum of the rewards from each row to its piece's end (no bootstrap)."""
    rewards = ops.float32(batch[sb.REWARDS])
    carry = ops.float32(gamma * (1.0 - ops.float32(batch[sb.SEGMENT_END])))  # 0 cuts at each piece's end
    batch[sb.ADVANTAGES] = reverse_scan(rewards, carry)
    return batch


def pg_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    out = module.forward_train(batch)
    dist = module.action_dist(out["action_dist_inputs"])
    policy_loss, ratio_stats = behaviour_weighted_pg(dist, batch)  # weighted by pi/mu when sampling overlaps learning
    entropy = dist.entropy().mean()
    total = policy_loss - cfg.entropy_coeff * entropy
    return total, {"total_loss": total, "policy_loss": policy_loss, "entropy": entropy, **ratio_stats}
