"""PPOConfig: PPO's training section, loss and learner connectors."""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.algorithms.ppo.action_space_defaults import auto_doc, auto_keys, resolve_auto
from marl.algorithms.ppo.loss import LOSS_COLUMNS, ppo_loss, proximal_log_probs
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.config.checks import AUTO
from marl.config.checks import doc
from marl.connectors import gae_pieces
from marl.data import sample_batch as sb
from marl.algorithms.ppo.workflow import ppo_workflow


@dataclass
class PPOTraining:
    lr: float = doc("Adam learning rate", 3e-4, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-5, min=0)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    gae_lambda: float = doc(auto_doc("GAE lambda", "gae_lambda"), AUTO, min=0, max=1, auto=True)
    train_batch_size: int = doc("agent steps per learner update (agent steps: rows of all policies, one per acting agent per env step; a single-agent env step is one); its cost and memory do not grow with the number of agents", 4096, min=1)
    minibatch_size: int = doc(auto_doc("agent rows per SGD minibatch (num_epochs x train_batch_size / minibatch_size SGD steps per update, whatever the number of agents)", "minibatch_size"), AUTO, min=1, at_most="train_batch_size", auto=True)
    num_epochs: int = doc(auto_doc("passes over each train batch", "num_epochs"), AUTO, min=1, auto=True)
    clip_param: float = doc("PPO ratio clip epsilon", 0.2, min=0)
    vf_clip_param: float = doc("clip of the value prediction change", 10.0, min=0)
    vf_loss_coeff: float = doc(auto_doc("value loss weight", "vf_loss_coeff"), AUTO, min=0, auto=True)
    entropy_coeff: float = doc("entropy bonus weight", 0.0, min=0)
    grad_clip: float | None = doc(auto_doc("max global gradient norm; null: no clipping", "grad_clip"), AUTO, min=0, auto=True)
    standardize_advantages: bool = doc("standardise advantages over each policy's train batch", True)
    popart: bool = doc(auto_doc("PopArt value normalisation (marl.modules.popart): the default module's value head learns normalised returns, rescaled as their running mean and std move, and the value loss is in units of that std (per policy: model.popart); off for discrete actions, whose gradient clip of 0.5 was set with the raw-scale value gradient taking most of the clipped norm", "popart"), AUTO, auto=True)
    model: dict = doc(auto_doc("default model options of every policy: hiddens, activation, conv_filters, ... (the reference's training.model table; a mapping given replaces the default whole)", "model"), AUTO, auto=True)


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
        # Box actions: the `auto` keys' BOX values (action_space_defaults); the 3-iteration mean of the episodes' returns
        CanonicalTask("Pendulum-v1", threshold=-300, budget=250_000, window=3, hold=750_000,
                      measured="-281 at 106k env steps (Box auto: PopArt, grad clip 0.5; seeds 0/2/3: 119k/115k/115k; "
                               "popart false: 143k-156k); the last 10 iterations at 750k -147 to -165 on seeds 0-3 "
                               "(without the clip seed 1 fell to -841)"),
    )
    sample_columns = frozenset({sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE})
    training_section_cls = PPOTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=True,
                                mixed_family="on_policy", self_play=True)
    batch_in_agent_steps = True  # train_batch_size counts agent steps
    model_options = ("popart",)

    def resolve_auto_keys(self, env_spec):
        """Every `auto` training key, set for the env's observations and action space (`action_space_defaults`)."""
        if auto_keys(self.training_cfg):
            spec = env_spec()
            resolve_auto(self.training_cfg, spec.acts_in_box, spec.observes_images)

    def algorithm_parts(self):
        return PPOParts(decoupled=self.env_runners_cfg.overlap)

    def default_workflow(self):
        return ppo_workflow(self)
