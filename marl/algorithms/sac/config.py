"""SACConfig: soft actor-critic for Box (tanh-squashed Gaussian) and Discrete actions, per policy.

Three parameter groups on the learner seam, updated in this order on every replayed
minibatch: `critic` (twin Q), `actor`, `alpha` (the learned temperature); one target copy,
`critic`, Polyak-averaged by the graph's `update_target` node. The graph is DQN's
(sample -> store -> replay -> learn -> update_priorities -> update_target -> sync_weights).
TD3, MASAC and MADDPG build on this config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import BOX, DISCRETE, Capabilities
from marl.algorithms.sac.loss import CRITIC_TARGET, LOSS_COLUMNS, actor_loss, alpha_loss, critic_loss
from marl.errors import ConfigError
from marl.config.checks import doc
from marl.data import sample_batch as sb
from marl.learners.param_groups import ParamGroup, TargetCopy
from marl.modules.q_mlp import piecewise_linear
from marl.replay import buffer_settings
from marl.algorithms.sac.workflow import polyak_per_round
from marl.algorithms.sac.workflow import sac_workflow


@dataclass
class ReplayActorCriticTraining:
    """What the off-policy actor-critics share: discounting, replay, the update ratio and the target copies."""

    lr: float = doc("Adam learning rate of every parameter group without a rate of its own", 1e-3, min=0)
    actor_lr: float | None = doc("Adam learning rate of the actor; null: lr", None, min=0)
    critic_lr: float | None = doc("Adam learning rate of the critics; null: lr", None, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-8, min=0)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    train_batch_size: int = doc("replayed transitions per policy per learner update", 256, min=1)
    n_step: int = doc("steps summed into each target before bootstrapping", 1, min=1)
    twin_q: bool = doc("two critics; targets and the actor use their minimum (clipped double Q)", True)
    grad_clip: float | None = doc("max global gradient norm of each parameter group; null: no clipping", None, min=0)
    tau: float = doc("Polyak weight of the target critics per learner update (applied once per sampling round)", 0.005, min=0, max=1)
    training_intensity: float | None = doc(
        "replayed transitions per sampled env step (train_batch_size of them per update); null: one update per sampling round",
        256, min=0,
    )
    num_steps_sampled_before_learning_starts: int = doc("transitions a policy's buffer holds before it is replayed", 1000, min=0)
    min_env_steps_per_iteration: int = doc("env steps sampled per train() iteration", 1000, min=0)
    replay_capacity: int = doc("transitions each policy's buffer holds", 100_000, min=1)
    prioritized_replay: bool = doc("prioritised replay (proportional, on the critics' TD errors) instead of uniform", False)
    prioritized_replay_alpha: float = doc("how much priorities shape sampling (0: uniform)", 0.6, min=0)
    prioritized_replay_beta: float = doc("initial importance-weight exponent", 0.4, min=0, max=1)
    prioritized_replay_beta_final: float = doc("importance-weight exponent after annealing", 1.0, min=0, max=1)
    prioritized_replay_beta_annealing_steps: int = doc("transitions added over which beta anneals; 0: constant", 50_000, min=0)
    model: dict = doc(
        "actor and critic options: hiddens, critic_hiddens (default: hiddens), activation",
        default_factory=lambda: {"hiddens": [256, 256], "activation": "relu"},
    )


@dataclass
class SACTraining(ReplayActorCriticTraining):
    # Values must reach long horizons quickly (CartPole's 500 steps; TD3/MASAC keep 0.005 and 1-step targets):
    # with 0.005 the target critics' values grew by ~2 per 1000 env steps on CartPole and the policy plateaued.
    tau: float = doc("Polyak weight of the target critics per learner update (applied once per sampling round)", 0.02, min=0, max=1)
    n_step: int = doc("steps summed into each target before bootstrapping", 3, min=1)
    alpha_lr: float | None = doc("Adam learning rate of the temperature (log alpha); null: lr", None, min=0)
    initial_alpha: float = doc("temperature alpha at the start (the entropy bonus's weight)", 1.0, min=1e-8)
    target_entropy: float | None = doc(
        "entropy alpha steers the policy to, per agent; null: -action dims (Box), "
        "discrete_target_entropy_scale * log(actions) (Discrete)", None,
        check=lambda v: None if v is None or math.isfinite(v) else "must be a finite number (or null)",
    )
    discrete_target_entropy_scale: float = doc("Discrete actions: the target entropy as a share of the maximum, log(actions)", 0.1, min=0, max=1)
    dueling: bool = doc(
        "Discrete actions: dueling critics, Q = V + A - mean(A) (the actions' values differ by little next to their size)", True,
    )


def group_lr(cfg, group: str) -> float:
    """`<group>_lr` where set, else the shared `lr`."""
    own = getattr(cfg, f"{group}_lr")
    return float(cfg.lr if own is None else own)


class SACParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    per_row_stats = ("td_error",)
    losses = (critic_loss, actor_loss, alpha_loss)  # MASAC: its own, for centralised critics over Discrete actions

    def param_groups(self, cfg):
        critic, actor, alpha = self.losses
        return [
            ParamGroup("critic", critic, lr=group_lr(cfg, "critic"), eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                       params=lambda m: m.critic_parameters()),
            ParamGroup("actor", actor, lr=group_lr(cfg, "actor"), eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                       params=lambda m: m.actor_parameters()),
            ParamGroup("alpha", alpha, lr=group_lr(cfg, "alpha"), eps=cfg.adam_eps, params=lambda m: [m.log_alpha]),
        ]

    def target_copies(self, cfg):
        return [TargetCopy(CRITIC_TARGET, of=lambda m: m.critics)]


class SACConfig(AlgorithmConfig):
    algo_name = "SAC"
    canonical_tasks = (
        CanonicalTask("Pendulum-v1", threshold=-250, budget=10_000, measured="-97 at 3k env steps, 38 s"),
        # Discrete actions: the stochastic policy's return in one iteration (benchmarks/studies/sac_cartpole.py, same rule).
        # Seeds 0-2 all pass there (its record); the defaults test runs seed 0 alone: seeds 1 and 2 take 200 s each
        # in CI, which would put the defaults test past its 10-minute budget.
        CanonicalTask("CartPole-v1", threshold=450, budget=100_000, seeds=(0,), measured="465 at 7k env steps (seed 0; seeds 1, 2: 500 at 17k, 488 at 16k in benchmarks/studies/sac_cartpole.py; greedy then 206, 415, 417)"),
    )
    training_section_cls = SACTraining
    capabilities = Capabilities(action_spaces=DISCRETE | BOX, recurrent=False, overlap=False,
                                mixed_family="replay")
    default_module_class = "marl.modules.actor_q:ActorQModule"
    # Transitions (the next action mask in masked envs only: discrete SAC's soft value at s'); no values, no log-probs.
    sample_columns = frozenset({sb.NEXT_OBS, sb.NEXT_ACTION_MASK})
    deterministic = False  # TD3/MADDPG: a deterministic actor with exploration noise
    model_options = ("twin_q", "dueling", "initial_alpha")

    def __init__(self):
        super().__init__()
        # One env copy, short fragments: each sampling round is followed by its share of updates
        # (training_intensity), so learning follows the data closely.
        self.env_runners_cfg.num_envs_per_env_runner = 1
        self.env_runners_cfg.rollout_fragment_length = 8

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        if self.deterministic and plan.module_class == self.default_module_class:  # the algorithm's kind, not a key
            plan = replace(plan, model={**plan.model, "deterministic": True})
        # the actor acts in [-1, 1] (tanh): the unsquash piece maps its Box actions to the env's bounds
        return replace(plan, replay=buffer_settings(self.training_cfg), unsquash_actions=True)

    def target_update(self, updates_per_round: float) -> tuple[int, float]:
        """Once per sampling round, the compound of the round's per-update Polyak steps (as in SAC's own graph)."""

        return 1, min(1.0, max(polyak_per_round(self.training_cfg.tau, updates_per_round), 1e-6))

    def algorithm_parts(self):
        return SACParts()

    def joint_replay(self) -> bool:
        """Store one transition per group and env step (centralised critics), not one per agent."""
        return False

    def default_workflow(self):
        return sac_workflow(self, self.algo_name.lower(), joint=self.joint_replay())


def check_schedule(schedule, key: str) -> None:
    """A [[env_step, value], ...] schedule of non-negative values, or one clear line naming the key."""
    try:
        piecewise_linear(schedule, 0)
    except (TypeError, ValueError, IndexError):
        raise ConfigError(f"'{key}' must be a list of [env_step, value] pairs, got {schedule!r}") from None
    if any(float(v) < 0 for _, v in schedule):
        raise ConfigError(f"'{key}' values must be >= 0, got {schedule!r}")
