"""TD3Config: deterministic actor with exploration noise, twin critics, smoothed targets, delayed actor updates.

Two parameter groups: `critic` on every minibatch step, `actor` on every `policy_delay`-th;
target copies of both (`critic`, `actor`), Polyak-averaged by the graph's `update_target` node.
The graph and the replay settings are SAC's.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import BOX, Capabilities
from marl.algorithms.sac.config import ReplayActorCriticTraining, SACConfig, check_schedule, group_lr
from marl.algorithms.sac.loss import CRITIC_TARGET, LOSS_COLUMNS
from marl.config.checks import doc
from marl.algorithms.td3.loss import ACTOR_TARGET, actor_loss, critic_loss
from marl.learners.param_groups import ParamGroup, TargetCopy


@dataclass
class TD3Training(ReplayActorCriticTraining):
    policy_delay: int = doc("critic updates per actor update (the actor and the targets lag the critics)", 2, min=1)
    target_noise: float = doc("std of the noise added to the target actor's actions (target policy smoothing); 0: none", 0.2, min=0)
    target_noise_clip: float = doc("the target noise is clipped to [-target_noise_clip, target_noise_clip]", 0.5, min=0)
    exploration_noise: list = doc(
        "std of the Gaussian noise added to actions while sampling, as a schedule [[env_step, sigma], ...], "
        "linear between points (actions in [-1, 1])",
        default_factory=lambda: [[0, 0.5], [10000, 0.1]],
    )


class TD3Parts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    per_row_stats = ("td_error",)
    losses = (critic_loss, actor_loss)  # MADDPG: its own, for centralised critics over Discrete actions

    def param_groups(self, cfg):
        critic, actor = self.losses
        return [
            ParamGroup("critic", critic, lr=group_lr(cfg, "critic"), eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                       params=lambda m: m.critic_parameters()),
            ParamGroup("actor", actor, lr=group_lr(cfg, "actor"), eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                       params=lambda m: m.actor_parameters(), every=int(cfg.policy_delay)),
        ]

    def target_copies(self, cfg):
        return [TargetCopy(CRITIC_TARGET, of=lambda m: m.critics), TargetCopy(ACTOR_TARGET, of=lambda m: m.actors)]


class TD3Config(SACConfig):
    algo_name = "TD3"
    canonical_tasks = (
        CanonicalTask("Pendulum-v1", threshold=-250, budget=12_000, measured="-194 at 5k env steps, 49 s; actor_lr 0: -1293 at 12k"),
    )
    training_section_cls = TD3Training
    capabilities = Capabilities(action_spaces=BOX, recurrent=False, overlap=False,
                                mixed_family="replay")
    deterministic = True
    model_options = ("twin_q", "exploration_noise")  # no `dueling`: its critics are Box only; no temperature

    def validate(self) -> None:
        super().validate()
        check_schedule(self.training_cfg.exploration_noise, "training.exploration_noise")


    def algorithm_parts(self):
        return TD3Parts()
