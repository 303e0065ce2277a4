"""PPOConfig: PPO's training section, loss and learner connectors."""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.algorithms.ppo.loss import LOSS_COLUMNS, ppo_loss, proximal_log_probs
from marl.config.sections import doc
from marl.connectors import gae_pieces
from marl.data import sample_batch as sb
from marl.algorithms.ppo.workflow import ppo_workflow


@dataclass
class PPOTraining:
    lr: float = doc("Adam learning rate", 3e-4, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-5, min=0)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    gae_lambda: float = doc("GAE lambda", 0.95, min=0, max=1)
    train_batch_size: int = doc("agent steps per learner update (agent steps: rows of all policies, one per acting agent per env step; a single-agent env step is one); its cost and memory do not grow with the number of agents", 4096, min=1)
    minibatch_size: int = doc("agent rows per SGD minibatch (num_epochs x train_batch_size / minibatch_size SGD steps per update, whatever the number of agents)", 64, min=1, at_most="train_batch_size")
    num_epochs: int = doc("passes over each train batch", 10, min=1)
    clip_param: float = doc("PPO ratio clip epsilon", 0.2, min=0)
    vf_clip_param: float = doc("clip of the value prediction change", 10.0, min=0)
    vf_loss_coeff: float = doc("value loss weight", 0.5, min=0)
    entropy_coeff: float = doc("entropy bonus weight", 0.0, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 0.5, min=0)
    standardize_advantages: bool = doc("standardise advantages over each policy's train batch", True)
    model: dict = doc("default model options of every policy: hiddens, activation, conv_filters, ... (the reference's training.model table)", default_factory=lambda: {"hiddens": [64, 64], "activation": "tanh"})


class PPOParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(ppo_loss)

    def __init__(self, decoupled: bool = False):
        if decoupled:  # overlapped sampling: the loss's trust region is centred on pi_prox (see ppo/loss.py)
            self.prepare = proximal_log_probs

    @staticmethod
    def learner_connectors(cfg):
        return gae_pieces(cfg.gamma, cfg.gae_lambda, cfg.standardize_advantages)


class PPOConfig(AlgorithmConfig):
    algo_name = "PPO"
    canonical_tasks = (
        CanonicalTask("CartPole-v1", threshold=450, budget=150_000, measured="480 at 41k env steps, 15 s"),
    )
    sample_columns = frozenset({sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE})
    training_section_cls = PPOTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, images=True, overlap=True,
                                mixed_family="on_policy", centralised_critic=False, batched=True)
    batch_in_agent_steps = True  # train_batch_size counts agent steps

    def algorithm_parts(self):
        return PPOParts(decoupled=self.env_runners_cfg.overlap)

    def default_workflow(self):
        return ppo_workflow(self)
