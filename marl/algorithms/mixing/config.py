"""MixingConfig: DQN over a group's joint transitions, with a mixer on top of the per-agent Q networks.

Each policy is one cooperative group: the agents mapped to it share its
agent Q network and are mixed into one team value. VDNConfig and QMIXConfig
only pick the mixer and its options.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from marl.algorithms.algorithm_config import AlgorithmParts
from marl.algorithms.dqn.config import DQNConfig, DQNTraining
from marl.algorithms.mixing.loss import LOSS_COLUMNS, mixing_loss
from marl.config.sections import EnvRunnersSection
from marl.config.checks import doc, schedule_of_probabilities
from marl.policies import resolve_policies
from marl.algorithms.mixing.workflow import mixing_workflow


@dataclass
class MixingTraining(DQNTraining):
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    train_batch_size: int = doc("replayed joint transitions (env steps of a group) per learner update; recurrent agents: replayed sequences (chunks of model.max_seq_len joint steps)", 64, min=1, at_most="replay_capacity")
    dueling: bool = doc("dueling head on each agent's Q network: Q = V + A - mean(A)", False)
    td_error_loss: str = doc("loss on the team TD error", "mse", choices=("huber", "mse"))
    replay_capacity: int = doc("joint transitions each group's buffer holds (recurrent agents: sequences)", 50_000, min=1)
    num_steps_sampled_before_learning_starts: int = doc("joint transitions (recurrent agents: sequences) a group's buffer holds before it is replayed", 1000, min=0, at_most="replay_capacity")
    agent_id: bool = doc("append a one-hot of the agent's place in its group to its observation", True)
    # Value decomposition keeps its own defaults where DQN's are sized for one CartPole agent.
    n_step: int = doc("steps summed into each target before bootstrapping", 1, min=1)
    burn_in: int = doc(
        "recurrent Q networks (model.recurrent): steps before each replayed sequence that only warm up its state "
        "from the state stored there (R2D2's burn-in; no TD loss on them); 0: each "
        "sequence starts from the state stored at its first step", 0, min=0)
    epsilon: list = doc(
        "epsilon-greedy schedule [[env_step, epsilon], ...], linear between points",
        check=schedule_of_probabilities, default_factory=lambda: [[0, 1.0], [10000, 0.05]],
    )
    target_network_update_freq: int = doc("env steps sampled between target network updates", 500, min=1)
    # 8 replayed joint transitions per env step (one 64-row update per 8 env steps): null, one update per
    # 1,000-env-step round, gave 20 updates in 20k env steps and no learning on simple_spread.
    training_intensity: float | None = doc(
        "replayed joint transitions per sampled env step; null: one update per sampling round", 8, min=0
    )
    model: dict = doc("default agent Q-network options: hiddens, activation; recurrent (gru|lstm: recurrent agents on sequence replay), cell_size, max_seq_len", default_factory=lambda: {"hiddens": [64, 64], "activation": "relu"})


class MixingParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(mixing_loss)
    uses_target_network = True  # the target copy holds both the agent network and the mixer
    per_row_stats = ("td_error",)


class MixingConfig(DQNConfig):
    algo_name = "?"
    training_section_cls = MixingTraining
    default_module_class = "marl.modules.joint_q:JointQModule"
    mixer = "?"  # "vdn" | "qmix"
    model_options = DQNConfig.model_options + ("agent_id",)

    def __init__(self):
        super().__init__()
        # Small sampling rounds (8 env copies x 5 steps) interleaved with the updates they pay for
        # (training_intensity), so learning follows the data closely, as DQN's.
        self.env_runners_cfg = EnvRunnersSection(num_envs_per_env_runner=8, rollout_fragment_length=5)

    def agent_groups(self) -> dict[str, list[int]]:
        """Each policy's env agent indices (positions in `possible_agents`): the agents mapped to it."""
        spec = self.env_spec()
        _, agents_of = resolve_policies(spec, self.policy_specs(), self.policy_mapping())
        return {pid: [spec.possible_agents.index(a) for a in agents] for pid, agents in agents_of.items()}

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        groups = self.agent_groups()
        model = dict(plan.model)
        if plan.module_class == self.default_module_class:
            model.setdefault("mixer", self.mixer)
            model["agent_indices"] = groups[policy_id]
        return replace(plan, model=model, group_agent_indices=groups.get(policy_id))

    def algorithm_parts(self):
        return MixingParts()

    def default_workflow(self):
        return mixing_workflow(self, self.algo_name.lower())
