"""APPOConfig: IMPALA's asynchronous actor-learner pipeline with PPO's clipped objective."""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmParts
from marl.algorithms.appo.loss import appo_loss, appo_prepare
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.algorithms.impala.config import IMPALAConfig, IMPALATraining
from marl.algorithms.impala.loss import LOSS_COLUMNS
from marl.errors import ConfigError
from marl.config.checks import doc
from marl.algorithms.impala.workflow import async_actor_learner_workflow


@dataclass
class APPOTraining(IMPALATraining):
    lr: float = doc("Adam learning rate", 5e-4, min=0)
    train_batch_size: int = doc("agent steps per learner update (agent steps: rows of all policies, one per acting agent per env step; a single-agent env step is one; fragments are concatenated up to it)", 1000, min=1)
    num_epochs: int = doc("passes over each train batch", 2, min=1)
    minibatch_size: int | None = doc("agent rows per SGD step; null: the whole batch", 256, min=1, at_most="train_batch_size")
    clip_param: float = doc("PPO ratio clip epsilon (ratio against the target policy; see appo/loss.py)", 0.3, min=0)
    target_network_update_freq: int | None = doc(
        "sampled env steps between refreshes of the target policy; null: no target policy, the ratio is taken "
        "against the behaviour policy", 2000, min=1,
    )
    use_kl_loss: bool = doc("add kl_coeff * KL(target policy || policy) to the loss", False)
    kl_coeff: float = doc("weight of the KL term when use_kl_loss", 1.0, min=0)
    standardize_advantages: bool = doc("standardise the V-trace advantages over each policy's train batch", True)
    entropy_coeff: float = doc("entropy bonus weight", 0.0, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 0.5, min=0)


class APPOParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(appo_loss)
    prepare = staticmethod(appo_prepare)

    def __init__(self, uses_target_network: bool):
        self.uses_target_network = uses_target_network  # the target policy the trust region is centred on


class APPOConfig(IMPALAConfig):
    algo_name = "APPO"
    canonical_tasks = (
        CanonicalTask("CartPole-v1", threshold=450, budget=300_000, measured="459 at 41k env steps, 5 s (training.popart; false: 453 at 82k)"),
    )
    training_section_cls = APPOTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=False,  # asynchronous already
                                mixed_family=None)

    def validate(self) -> None:
        super().validate()
        t = self.training_cfg
        if t.use_kl_loss and t.target_network_update_freq is None:
            raise ConfigError(
                "'training.use_kl_loss' needs the target policy it measures the KL from: set "
                "'training.target_network_update_freq' (null turns the target policy off)"
            )

    def algorithm_parts(self):
        return APPOParts(uses_target_network=self.training_cfg.target_network_update_freq is not None)

    def default_workflow(self):
        t = self.training_cfg
        return async_actor_learner_workflow(self, "appo", target_update_every=t.target_network_update_freq)
