"""A2CConfig: advantage actor-critic, one gradient step on each (small) train batch.

Defaults learn CartPole-v1 and hold it (mean return >= 450 within 150k env steps, still >= 450 over the last
10 iterations at 450k: tests/test_defaults_learn.py): 8 env copies x 16 steps per update, PopArt values.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.a2c.loss import LOSS_COLUMNS, a2c_loss
from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.config.checks import doc
from marl.connectors import gae_pieces
from marl.data import sample_batch as sb
from marl.workflow import synchronous_workflow

ROLLOUT_FRAGMENT_LENGTH = 16  # env steps per env copy in one sampling round (one update with the default batch)


@dataclass
class A2CTraining:
    lr: float = doc("Adam learning rate", 1e-3, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-5, min=0)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    gae_lambda: float = doc("GAE lambda; 1.0: n-step returns bootstrapped at each fragment's end", 0.95, min=0, max=1)
    train_batch_size: int = doc("agent steps per gradient step (agent steps: rows of all policies, one per acting agent per env step; a single-agent env step is one; default: one sampling round of a single-agent env, 8 env copies x 16 steps)", 128, min=1)
    vf_loss_coeff: float = doc("value loss weight", 0.5, min=0)
    entropy_coeff: float = doc("entropy bonus weight", 0.0, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 0.5, min=0)
    standardize_advantages: bool = doc("standardise advantages over each policy's train batch", True)
    min_env_steps_per_iteration: int = doc("env steps sampled per train() iteration (many updates)", 2048, min=0)
    popart: bool = doc("PopArt value normalisation (marl.modules.popart): the default module's value head learns normalised returns, rescaled as their running mean and std move, and the value loss is in units of that std (per policy: model.popart); on by default: with raw-scale values the value gradient takes most of the clipped gradient norm (grad_clip) and the policy fell back after learning (CartPole held to 450k env steps: seed 1's last 10 iterations 174 without it; with it 12 seeds of 12 hold 500)", True)
    model: dict = doc("default model options of every policy: hiddens, activation, conv_filters, ... (the reference's training.model table)", default_factory=lambda: {"hiddens": [64, 64], "activation": "tanh"})


class A2CParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(a2c_loss)

    @staticmethod
    def learner_connectors(cfg):
        return gae_pieces(cfg.gamma, cfg.gae_lambda, cfg.standardize_advantages)


class A2CConfig(AlgorithmConfig):
    algo_name = "A2C"
    canonical_tasks = (
        CanonicalTask(
            "CartPole-v1", threshold=450, budget=150_000, hold=450_000,
            measured="seeds 0-11 reach 450 at 70k-119k env steps and hold 500 over the last 10 iterations at 450k "
                     "(about 1 min each); training.popart=false: reach at 31k-107k, then seed 1 falls to 174 and seed 3 "
                     "(with standardize_advantages=false) to 161"),
    )
    training_section_cls = A2CTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=True,
                                mixed_family="on_policy", self_play=True)
    batch_in_agent_steps = True  # train_batch_size counts agent steps
    model_options = ("popart",)
    sample_columns = frozenset({sb.VF_PREDS, sb.BOOTSTRAP_VALUE})  # no action log-probs: no ratio to the sampling policy

    def __init__(self):
        super().__init__()
        self.env_runners_cfg.rollout_fragment_length = ROLLOUT_FRAGMENT_LENGTH

    def columns_for(self, policy_id: str) -> frozenset[str]:
        """Overlapped sampling trains on rows of the weights one update back: record their log-probs for the ratio."""
        columns = super().columns_for(policy_id)
        return columns | {sb.ACTION_LOGP} if self.env_runners_cfg.overlap else columns

    def algorithm_parts(self):
        return A2CParts()

    def default_workflow(self):
        """PPO's shape, one gradient step per small batch; an iteration reports over many of them:

        sample(sync) --batch--> concat(train_batch_size) --batch--> learn
            --results--> sync_weights(all) --results--> report(min_env_steps_per_iteration)
        """

        return synchronous_workflow(self, "a2c", report_min_env_steps=self.training_cfg.min_env_steps_per_iteration)
