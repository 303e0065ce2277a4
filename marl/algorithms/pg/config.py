"""PGConfig: vanilla policy gradient (REINFORCE with returns-to-go), one gradient step per batch.

Sampling defaults to `env_runners.batch_mode: complete_episodes`, so every return
runs to its episode's end (nothing to bootstrap: PG has no critic). In a MIXED
run the env_runners section is shared: set complete_episodes there too, or the
returns of pieces cut at a fragment's end stop at the cut. Defaults learn
CartPole-v1 (mean return >= 450 within 300k env steps, tests/test_pg.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.algorithms.pg.loss import LOSS_COLUMNS, pg_loss, returns_to_go
from marl.config.checks import doc
from marl.connectors import StandardizeAdvantages
from marl.data import sample_batch as sb
from marl.workflow import synchronous_workflow


@dataclass
class PGTraining:
    lr: float = doc("Adam learning rate", 5e-3, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-5, min=0)
    gamma: float = doc("discount factor of the returns-to-go", 0.99, min=0, max=1)
    train_batch_size: int = doc("agent steps per gradient step (agent steps: rows of all policies, one per acting agent per env step; a single-agent env step is one; whole episodes: at least this many)", 2048, min=1)
    standardize_returns: bool = doc("standardise the returns-to-go over each policy's train batch (the mean is the baseline)", True)
    entropy_coeff: float = doc("entropy bonus weight", 0.0, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", None, min=0)
    model: dict = doc(
        "default model options of every policy: hiddens, activation, value_function (false: no value head, none is needed)",
        default_factory=lambda: {"hiddens": [64, 64], "activation": "tanh", "value_function": False},
    )


class PGParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(pg_loss)

    @staticmethod
    def learner_connectors(cfg):
        connectors = [partial(returns_to_go, gamma=cfg.gamma)]
        if cfg.standardize_returns:
            connectors.append(StandardizeAdvantages())  # the returns-to-go stand in `advantages`
        return connectors


class PGConfig(AlgorithmConfig):
    algo_name = "PG"
    canonical_tasks = (
        CanonicalTask("CartPole-v1", threshold=450, budget=150_000, measured="459 at 63k env steps, 3 s"),
    )
    training_section_cls = PGTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=True,
                                mixed_family="on_policy", self_play=True)
    batch_in_agent_steps = True  # train_batch_size counts agent steps
    sample_columns = frozenset()  # no value predictions, no log-probs: actions and rewards are enough

    def __init__(self):
        super().__init__()
        self.env_runners_cfg.batch_mode = "complete_episodes"

    def columns_for(self, policy_id: str) -> frozenset[str]:
        """Overlapped sampling trains on rows of the weights one update back: record their log-probs for the ratio."""
        columns = super().columns_for(policy_id)
        return columns | {sb.ACTION_LOGP} if self.env_runners_cfg.overlap else columns

    def algorithm_parts(self):
        return PGParts()

    def default_workflow(self):
        """sample(sync) --batch--> concat(train_batch_size) --batch--> learn --> sync_weights(all) --> report"""

        return synchronous_workflow(self, "pg")
