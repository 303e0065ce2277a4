"""CQLConfig: conservative Q-learning from recorded data (`offline.input`).

Discrete actions: CQL(H) on the DQN learner (`loss.py`, a QMLP). Box actions: CQL(H) on SAC's
learner (`continuous.py`, an ActorQModule: twin Q, squashed-Gaussian actor, learned temperature,
Polyak targets). Which one follows the env's action spaces (the config's env spec).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import gymnasium as gym

from marl.algorithms.algorithm_config import AlgorithmParts
from marl.algorithms.bc.config import OfflineConfig
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import BOX, DISCRETE, Capabilities
from marl.algorithms.cql.loss import LOSS_COLUMNS, cql_loss, prepare_transitions
from marl.errors import ConfigError
from marl.config.checks import doc
from marl.policies import resolve_policies
from marl.algorithms.cql.continuous import ContinuousCQLParts
from marl.algorithms.bc.workflow import offline_workflow


@dataclass
class CQLTraining:
    lr: float = doc("Adam learning rate (Box: of every group without a rate of its own)", 5e-4, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-8, min=0)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    # 5 (RLlib's min_q_weight): with 1.0 discrete CQL's greedy return on CartPole drifted (500 after 20
    # iterations, 271-348 after 30); with 5.0 it stayed at 487-500 from 20 to 50 iterations on seeds 1-3.
    cql_alpha: float = doc("weight of the conservative penalty soft-max_a Q(s, a) - Q(s, a_data); 0 is offline DQN / SAC", 5.0, min=0)
    train_batch_size: int = doc("recorded rows read per iteration (all policies together)", 2048, min=1)
    minibatch_size: int = doc("rows per SGD step", 256, min=1)
    num_epochs: int = doc("passes over each batch read", 4, min=1)
    double_q: bool = doc("Discrete: pick the next action with the online network, value it with the target network", True)
    dueling: bool = doc("Discrete: dueling head, Q = V + A - mean(A)", True)
    td_error_loss: str = doc("Discrete: loss on the TD error", "huber", choices=("huber", "mse"))
    grad_clip: float | None = doc("max global gradient norm (Box: of each group); null: no clipping", 10.0, min=0)
    target_network_update_freq: int = doc("Discrete: env steps read between target network updates", 4096, min=1)
    cql_num_actions: int = doc("Box: actions sampled per state and proposal (uniform, current policy) for the soft maximum", 5, min=1)
    cql_temperature: float = doc("Box: temperature T of the soft maximum T log sum exp(Q / T)", 1.0, min=1e-6)
    tau: float = doc("Box: Polyak weight of the target critics per SGD step", 0.01, min=0, max=1)
    actor_lr: float | None = doc("Box: Adam learning rate of the actor; null: lr", 1e-3, min=0)
    critic_lr: float | None = doc("Box: Adam learning rate of the critics; null: lr", 1e-3, min=0)
    alpha_lr: float | None = doc("Box: Adam learning rate of the temperature (log alpha); null: lr", None, min=0)
    initial_alpha: float = doc("Box: SAC temperature at the start", 0.2, min=1e-8)
    target_entropy: float | None = doc(
        "Box: entropy the temperature steers the policy to, per agent; null: -action dims", None,
        check=lambda v: None if v is None or math.isfinite(v) else "must be a finite number (or null)",
    )
    twin_q: bool = doc("Box: two critics; targets and the actor use their minimum", True)
    model: dict = doc("default model options: hiddens, activation (Box: also critic_hiddens)",
                      default_factory=lambda: {"hiddens": [256, 256], "activation": "relu"})


class CQLParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(cql_loss)
    prepare = staticmethod(prepare_transitions)
    uses_target_network = True


class CQLConfig(OfflineConfig):
    algo_name = "CQL"
    # 50 iterations: CartPole's offline Q-learning must stay good, not peak and drift (as with cql_alpha 1).
    # Box actions: SAC's learner with the conservative penalty on Pendulum-v1's mixed recording; 30 iterations
    # (an iteration costs 8x CartPole's: 10 sampled actions a state through two 256x256 critics), judged at 20
    # and 30. benchmarks/studies/cql_pendulum.py holds 50 and 100-iteration runs (no drift) and cql_alpha 0's -727 to -933.
    canonical_tasks = (
        CanonicalTask(
            "CartPole-v1", threshold=400, budget=50, data="cartpole_mixed",
            measured="greedy 451-500 at iterations 30, 40, 50 (seeds 1-3), 26 s; cql_alpha 1: 293 at 30; lr 0: 31",
        ),
        CanonicalTask(
            "Pendulum-v1", threshold=-500, budget=30, data="pendulum_mixed",  # the recording's mean: about -600
            measured="greedy -413 / -320 at iterations 20 / 30 (seed 1; seeds 2, 3: -244 / -349, -245 / -155), "
                     "100 s at load 8; cql_alpha 0: -727 to -933 at 30",
        ),
    )
    training_section_cls = CQLTraining
    capabilities = Capabilities(action_spaces=DISCRETE | BOX, recurrent=False, overlap=False,
                                mixed_family=None,
                                note="Discrete actions: DQN's Q network (images through its conv encoder); Box: SAC's")
    default_module_class = "marl.modules.q_mlp:QMLP"
    continuous_module_class = "marl.modules.actor_q:ActorQModule"
    model_options = ("dueling", "twin_q", "initial_alpha")  # each to the module that reads it: DQN's or SAC's

    def continuous(self) -> bool:
        """True when the policies act in Box spaces (SAC's learner), False for Discrete (DQN's)."""
        specs, _ = resolve_policies(self.env_spec(), self.policy_specs(), self.policy_mapping())
        kinds = {pid: isinstance(spec.action_space, gym.spaces.Box) for pid, spec in specs.items()}
        if len(set(kinds.values())) > 1:
            raise ConfigError(f"CQL trains all policies one way: Box or Discrete actions, not both; got {kinds} (True: Box)")
        return next(iter(kinds.values()))

    def module_class_for(self, spec):
        if spec.module_class is not None:
            return spec.module_class
        return self.continuous_module_class if self.continuous() else self.default_module_class

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        if plan.module_class == self.default_module_class:  # acts greedily (evaluation only): no training key
            plan = replace(plan, model={"epsilon": [[0, 0.0]], **plan.model})
        # Box: SAC's actor, acting in [-1, 1] as the SAC/TD3 runs that recorded the data did
        return replace(plan, unsquash_actions=self.continuous() or plan.unsquash_actions)

    def algorithm_parts(self):
        if self.continuous():
            return ContinuousCQLParts()
        return CQLParts()

    def default_workflow(self):
        t = self.training_cfg
        if self.continuous():  # Polyak after every batch read: its SGD steps' worth of tau
            steps = t.num_epochs * math.ceil(t.train_batch_size / t.minibatch_size)
            tau = min(1.0, max(1.0 - (1.0 - t.tau) ** steps, 1e-6))
            return offline_workflow(self, "cql", target_every=1, tau=tau)
        return offline_workflow(self, "cql", target_every=t.target_network_update_freq)
