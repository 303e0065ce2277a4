"""BCConfig: behaviour cloning from recorded data (`offline.input`), one policy per mapped agent group."""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.bc.loss import LOSS_COLUMNS, bc_loss
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.errors import ConfigError
from marl.config.checks import doc
from marl.algorithms.bc.workflow import offline_workflow


@dataclass
class BCTraining:
    lr: float = doc("Adam learning rate", 1e-3, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-8, min=0)
    train_batch_size: int = doc("recorded rows read per learner update (all policies together)", 2000, min=1)
    minibatch_size: int = doc("rows per SGD step", 256, min=1)
    num_epochs: int = doc("passes over each batch read", 1, min=1)
    entropy_coeff: float = doc("entropy bonus weight", 0.0, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", None, min=0)
    model: dict = doc("default model options of every policy: hiddens, activation", default_factory=lambda: {"hiddens": [256, 256], "activation": "relu"})


class BCParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(bc_loss)


class OfflineConfig(AlgorithmConfig):
    """What the offline algorithms share: they need `offline.input`; one in-process env copy (evaluation only)."""

    algo_name = "?"

    def __init__(self):
        super().__init__()
        self.env_runners_cfg.num_envs_per_env_runner = 1  # nothing samples for training; runners stay idle

    def validate(self) -> None:
        super().validate()
        if not self.offline_cfg.input:
            raise ConfigError(
                f"{self.algo_name} trains from recorded data: set 'offline.input' (a folder, a glob or a list; "
                "record with 'offline.output' or `marl evaluate CHECKPOINT --record DIR`)"
            )


class BCConfig(OfflineConfig):
    algo_name = "BC"
    canonical_tasks = (
        CanonicalTask(
            "CartPole-v1", threshold=450, budget=50, data="cartpole_expert",
            measured="greedy 500 at iterations 30, 40, 50 (425-473 at 20), 23 s; lr 0: 31",
        ),
    )
    training_section_cls = BCTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=False,
                                mixed_family=None)

    def algorithm_parts(self):
        return BCParts()

    def default_workflow(self):
        return offline_workflow(self, "bc")
