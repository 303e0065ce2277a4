"""CQLConfig: conservative Q-learning on the DQN learner (discrete actions) from recorded data (`offline.input`).

Continuous-action CQL belongs on SAC's learner (not built yet)."""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmParts
from marl.algorithms.bc.config import OfflineConfig
from marl.algorithms.cql.loss import LOSS_COLUMNS, cql_loss, prepare_transitions
from marl.algorithms.sections import doc


@dataclass
class CQLTraining:
    lr: float = doc("Adam learning rate", 5e-4, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-8, min=0)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    cql_alpha: float = doc("weight of the conservative penalty logsumexp Q(s, .) - Q(s, a); 0 is offline DQN", 1.0, min=0)
    train_batch_size: int = doc("recorded rows read per iteration (all policies together)", 2048, min=1)
    minibatch_size: int = doc("rows per SGD step", 256, min=1)
    num_epochs: int = doc("passes over each batch read", 4, min=1)
    double_q: bool = doc("pick the next action with the online network, value it with the target network", True)
    dueling: bool = doc("dueling head: Q = V + A - mean(A)", True)
    td_error_loss: str = doc("loss on the TD error", "huber", choices=("huber", "mse"))
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 10.0, min=0)
    target_network_update_freq: int = doc("env steps read between target network updates", 4096, min=1)
    model: dict = doc("default Q-model options: hiddens, activation", default_factory=lambda: {"hiddens": [256, 256], "activation": "relu"})


class CQLParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(cql_loss)
    prepare = staticmethod(prepare_transitions)
    uses_target_network = True


class CQLConfig(OfflineConfig):
    algo_name = "CQL"
    training_section_cls = CQLTraining
    default_module_class = "marl.modules.q_mlp:QMLP"

    def model_for(self, policy_id: str) -> dict:
        model = super().model_for(policy_id)
        if self.module_class_for(self.policy_specs()[policy_id]) == self.default_module_class:
            model.setdefault("dueling", self.training_cfg.dueling)
            model.setdefault("epsilon", [[0, 0.0]])  # acts greedily (evaluation only)
        return model

    def algorithm_parts(self):
        return CQLParts()

    def default_workflow(self):
        from marl.algorithms.bc.workflow import offline_workflow

        return offline_workflow(self, "cql", target_every=self.training_cfg.target_network_update_freq)
