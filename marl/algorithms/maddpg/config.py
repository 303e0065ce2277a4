"""MADDPGConfig: deterministic decentralised actors, a centralised critic per cooperative group (Lowe et al. 2017).

TD3's machinery with one critic, no target smoothing and an actor update on every
step by default (`twin_q`, `target_noise`, `policy_delay` turn TD3's tricks back on);
the groups, joint replay and shared or per-agent actors are MASAC's
(`marl.algorithms.masac.config`). Each actor's gradient goes through the joint
action in which every agent acts with its current actor. Box or Discrete actions; Discrete: the critic reads
every agent's one-hot action and each actor is trained through a straight-through Gumbel-softmax of its logits
(`marl.algorithms.maddpg.loss`, `gumbel_temperature`).
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import BOX, DISCRETE, Capabilities
from marl.algorithms.masac.config import GROUP_MODEL_OPTIONS, CentralisedGroups, GroupTraining
from marl.config.checks import doc
from marl.algorithms.maddpg import loss as maddpg_loss
from marl.algorithms.td3.config import TD3Config, TD3Parts, TD3Training


@dataclass
class MADDPGTraining(TD3Training, GroupTraining):
    twin_q: bool = doc("two critics; targets use their minimum (TD3's clipped double Q); MADDPG has one", False)
    policy_delay: int = doc("critic updates per actor update", 1, min=1)
    target_noise: float = doc("Box actions: std of the noise added to the target actors' actions (TD3's smoothing); 0: none", 0.0, min=0)
    train_batch_size: int = doc("replayed joint transitions (env steps of a group) per learner update", 256, min=1)
    replay_capacity: int = doc("joint transitions each group's buffer holds", 100_000, min=1)
    num_steps_sampled_before_learning_starts: int = doc("joint transitions a group's buffer holds before it is replayed", 2000, min=0)
    training_intensity: float | None = doc(
        "replayed joint transitions per sampled env step (train_batch_size of them per update); null: one update per sampling round",
        64, min=0,
    )
    exploration_noise: list = doc(
        "Box actions: std of the Gaussian noise added to actions while sampling, as a schedule [[env_step, sigma], ...], "
        "linear between points (actions in [-1, 1]); Discrete actions explore by sampling the actor's softmax",
        default_factory=lambda: [[0, 0.5], [50000, 0.1]],
    )
    gumbel_temperature: float = doc(
        "Discrete actions: temperature T of the straight-through Gumbel-softmax the actor is trained through "
        "(forward: the one-hot sample; gradient: softmax((logits + g) / T)); lower: less bias, noisier gradients",
        1.0, min=1e-3,
    )


class MADDPGParts(TD3Parts):
    losses = (maddpg_loss.critic_loss, maddpg_loss.actor_loss)


class MADDPGConfig(CentralisedGroups, TD3Config):
    algo_name = "MADDPG"
    # simple_spread with continuous actions: a random team scores about -80 summed over the agents
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-66, budget=20_000, window=3,
            overrides=("environment.env_config.continuous_actions=true",),
            measured="-64.3 (3-iteration mean) at 9k env steps, 38 s; lr 0: -72.7 at 20k",
        ),
    )
    training_section_cls = MADDPGTraining
    model_options = TD3Config.model_options + GROUP_MODEL_OPTIONS
    capabilities = Capabilities(action_spaces=DISCRETE | BOX, recurrent=False, overlap=False,
                                mixed_family=None)

    def algorithm_parts(self):
        return MADDPGParts()
