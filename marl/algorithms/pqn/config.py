"""PQNConfig: parallelised Q-learning (Gallici et al. 2024): no replay buffer, no target network.

Each update learns from the fragment just sampled by many env copies: Q(lambda) returns over it (`loss.py`),
then `num_epochs` passes of minibatches, with a LayerNorm Q network (`marl.modules.q_mlp.QMLP`,
`model.layer_norm`) acting epsilon-greedily. Its graph is PPO's synchronous one (sample -> concat -> learn ->
sync_weights -> report); what makes it Q-learning is the module, the columns and the loss. Each agent learns
its own Q values from its own reward (independent Q-learning; the agents of a policy share its network);
PQN_VDN (`marl.algorithms.pqn_vdn`) learns the team's sum instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.algorithms.pqn.loss import LOSS_COLUMNS, pqn_loss, q_lambda_returns
from marl.config.capabilities import DISCRETE, Capabilities
from marl.config.checks import doc, schedule_of_probabilities
from marl.data import sample_batch as sb
from marl.workflow import Workflow
from marl.workflow.graphs import synchronous_workflow


@dataclass
class PQNTraining:
    # JaxMARL's PQN-VDN settings for MPE (baselines/QLearning/config/alg/pqn_vdn_ff_mpe.yaml: lr 5e-4, gamma 0.9,
    # lambda 0.3, grad norm 1, 4 epochs, 256x2 relu with LayerNorm), with batches and the epsilon schedule sized to
    # marl's budgets (JaxMARL: 4,096 env steps per update for 2M env steps).
    lr: float = doc("Adam learning rate", 5e-4, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-8, min=0)
    gamma: float = doc("discount factor", 0.9, min=0, max=1)
    q_lambda: float = doc("lambda of the Q(lambda) returns over each fragment (0: one-step Q-learning targets; 1: "
                          "Monte Carlo returns to the piece's end, bootstrapped there)", 0.3, min=0, max=1)
    train_batch_size: int = doc("agent steps per learner update (rows of all policies, one per acting agent per env step)", 1536, min=1)
    minibatch_size: int = doc("rows per SGD minibatch (num_epochs x train_batch_size / minibatch_size SGD steps per update)", 256, min=1, at_most="train_batch_size")
    num_epochs: int = doc("passes over each train batch", 4, min=1)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 1.0, min=0)
    min_env_steps_per_iteration: int = doc(
        "env steps sampled per train() iteration (updates of train_batch_size each; enough for episodes to end in "
        "every iteration's report)", 2048, min=0)
    epsilon: list = doc(
        "epsilon-greedy schedule [[env_step, epsilon], ...], linear between points",
        check=schedule_of_probabilities, default_factory=lambda: [[0, 1.0], [20000, 0.1]],
    )
    model: dict = doc("default Q-model options: hiddens, activation, layer_norm (Gallici et al.'s stabiliser for bootstrapping without a target "
                      "network), dueling, conv_filters, ... (the reference's training.model table)",
                      default_factory=lambda: {"hiddens": [256, 256], "activation": "relu", "layer_norm": True, "dueling": False})


class PQNParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(pqn_loss)

    @staticmethod
    def learner_connectors(cfg):
        return [lambda batch: q_lambda_returns(batch, cfg.gamma, cfg.q_lambda)]


class PQNConfig(AlgorithmConfig):
    algo_name = "PQN"
    # simple_spread (3 agents, 25 steps, discrete): a random team scores about -79 summed over the agents
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-64, budget=60_000, window=3,
            measured="-63.0 (3-iteration mean) at 22.5k env steps, 126 s with the machine at load 15 (seeds 2, 3: "
                     "-63.7 at 22.5k, -63.6 at 28.7k); lr 0: -177 at 61k; the returns off by one step (r_t + gamma max_a Q(s_t, a)): -89.3 at 61k; without LayerNorm: -63.5 at 18k (passes)",
        ),
    )
    training_section_cls = PQNTraining
    capabilities = Capabilities(action_spaces=DISCRETE, recurrent=False, overlap=False,
                                mixed_family=None, batched=True)
    default_module_class = "marl.modules.q_mlp:QMLP"
    model_options = ("epsilon",)
    # V(s) = max_a Q(s, a) at every row and at the piece ends: what the Q(lambda) returns bootstrap from
    sample_columns = frozenset({sb.VF_PREDS, sb.BOOTSTRAP_VALUE})
    batch_in_agent_steps = True

    def __init__(self):
        super().__init__()
        # Many env copies, short fragments: each update learns from a wide, fresh slice of experience.
        self.env_runners_cfg.num_envs_per_env_runner = 32
        self.env_runners_cfg.rollout_fragment_length = 16

    def algorithm_parts(self):
        return PQNParts()

    def default_workflow(self) -> Workflow:
        return synchronous_workflow(self, self.algo_name.lower(), report_min_env_steps=self.training_cfg.min_env_steps_per_iteration)
