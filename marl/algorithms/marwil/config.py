"""MARWILConfig: advantage-weighted behaviour cloning from recorded data (`offline.input`, read in file order)."""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmParts
from marl.algorithms.bc.config import OfflineConfig
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.algorithms.marwil.loss import LOSS_COLUMNS, marwil_loss, prepare_returns
from marl.errors import ConfigError
from marl.config.checks import doc
from marl.algorithms.bc.workflow import offline_workflow


@dataclass
class MARWILTraining:
    lr: float = doc("Adam learning rate", 1e-3, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-8, min=0)
    gamma: float = doc("discount factor of the returns", 0.99, min=0, max=1)
    beta: float = doc("advantage temperature: 0 is behaviour cloning", 1.0, min=0)
    max_weight: float = doc("upper bound of a row's weight exp(beta * A / c)", 20.0, min=1)
    vf_coeff: float = doc("value loss weight", 1.0, min=0)
    train_batch_size: int = doc("recorded rows read per learner update (all policies together)", 2000, min=1)
    minibatch_size: int = doc("rows per SGD step", 256, min=1)
    num_epochs: int = doc("passes over each batch read", 1, min=1)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", None, min=0)
    model: dict = doc("default model options of every policy: hiddens, activation", default_factory=lambda: {"hiddens": [256, 256], "activation": "relu"})


class MARWILParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(marwil_loss)
    prepare = staticmethod(prepare_returns)


class MARWILConfig(OfflineConfig):
    algo_name = "MARWIL"
    canonical_tasks = (
        CanonicalTask(
            "CartPole-v1", threshold=450, budget=30, data="cartpole_mixed",
            measured="greedy 478-500 at iteration 20, 500 at 30 (441-472 at 10), 10 s",
        ),
    )
    training_section_cls = MARWILTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=False,
                                mixed_family=None)

    def __init__(self):
        super().__init__()
        self.offline_cfg.shuffle = "files"  # returns need each agent's rows in order

    def validate(self) -> None:
        super().validate()
        if self.offline_cfg.shuffle == "rows":
            raise ConfigError("MARWIL computes returns along each agent's rows: 'offline.shuffle' must be 'files' or 'none', got 'rows'")

    def algorithm_parts(self):
        return MARWILParts()

    def default_workflow(self):
        return offline_workflow(self, "marwil")
