"""MAPPO's loss is PPO's (Yu et al. 2022): the clipped surrogate on the decentralised
actor, the clipped value loss on the centralised critic. What differs is what the
module reads: the critic's input is the global state, so the loss needs the
`state` and `agent_index` columns beside PPO's.
"""

from marl.algorithms.ppo.loss import LOSS_COLUMNS as PPO_LOSS_COLUMNS
from marl.algorithms.ppo.loss import ppo_loss as mappo_loss
from marl.data import sample_batch as sb

LOSS_COLUMNS = PPO_LOSS_COLUMNS + (sb.STATE, sb.AGENT_INDEX)

__all__ = ["LOSS_COLUMNS", "mappo_loss"]
