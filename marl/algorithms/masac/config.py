"""MASACConfig: SAC with decentralised actors and a centralised critic per cooperative group.

Each policy is one group: the agents mapped to it. Its critics value the group's
joint observation and joint action at one env step, Q(o_1..o_n, a_1..a_n), learnt
from joint transitions (`store_to_replay(joint=true)`, `marl.replay.joint`: the
team reward is the sum of the group's rewards); each agent acts from its own
observation. `shared_actor` shares one actor across the group (with a one-hot of
the agent's place when `agent_id`), else each agent has its own. Map every agent
to one policy for one centralised group; agents mapped to different policies
are different groups, each with its own critic. `critic_state: global_state` has the
critics read the env's global state instead of the joined observations: the
state runners record for MAPPO's critic (`state()` where the env has one, else
all agents' joined observations, `marl.runners.global_state`), with the state
reached after each step (`next_state`) for the targets.

Box or Discrete actions. Discrete: the critic reads every agent's one-hot action and each actor is trained by
discrete SAC's expectation over its own actions given the others' (`marl.algorithms.masac.loss`, which says why
this form and not MADDPG's Gumbel-softmax relaxation).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import BOX, DISCRETE, Capabilities
from marl.algorithms.mixing.config import MixingConfig
from marl.algorithms.masac import loss as masac_loss
from marl.algorithms.sac.config import SACConfig, SACParts, SACTraining
from marl.config.sections import EnvRunnersSection
from marl.config.checks import doc
from marl.data import sample_batch as sb

JOINT_OBS, GLOBAL_STATE = "joint_obs", "global_state"
GROUP_MODEL_OPTIONS = ("shared_actor", "agent_id")  # GroupTraining's keys the group's module reads (model_options)


@dataclass
class GroupTraining:
    shared_actor: bool = doc("one actor shared by the group's agents; false: an actor per agent", True)
    agent_id: bool = doc("a shared actor reads a one-hot of the agent's place in its group too", True)
    critic_state: str = doc(
        "what the centralised critics read beside the joint action: joint_obs (the group's observations joined) "
        "or global_state (the env's state(), else all agents' joined observations, as MAPPO's critic)",
        JOINT_OBS, choices=(JOINT_OBS, GLOBAL_STATE),
    )


@dataclass
class MASACTraining(SACTraining, GroupTraining):
    tau: float = doc("Polyak weight of the target critics per learner update (applied once per sampling round)", 0.005, min=0, max=1)
    n_step: int = doc("steps summed into each target before bootstrapping", 1, min=1)
    train_batch_size: int = doc("replayed joint transitions (env steps of a group) per learner update", 256, min=1)
    replay_capacity: int = doc("joint transitions each group's buffer holds", 100_000, min=1)
    num_steps_sampled_before_learning_starts: int = doc("joint transitions a group's buffer holds before it is replayed", 2000, min=0)
    training_intensity: float | None = doc(
        "replayed joint transitions per sampled env step (train_batch_size of them per update); null: one update per sampling round",
        64, min=0,
    )
    dueling: bool = doc("SAC's per-agent Discrete critics only: MASAC's centralised critic values the joint one-hot action", False)


class MASACParts(SACParts):
    losses = (masac_loss.critic_loss, masac_loss.actor_loss, masac_loss.alpha_loss)


class CentralisedGroups:
    """What MASAC and MADDPG add to their single-agent configs: groups, joint replay, group module options."""


    def __init__(self):
        super().__init__()
        self.env_runners_cfg = EnvRunnersSection(num_envs_per_env_runner=4, rollout_fragment_length=25)

    def agent_groups(self) -> dict[str, list[int]]:
        """Each policy's env agent indices (positions in `possible_agents`): the agents mapped to it."""
        return MixingConfig.agent_groups(self)

    def joint_replay(self) -> bool:
        return True

    def columns_for(self, policy_id: str) -> frozenset[str]:
        columns = super().columns_for(policy_id)
        if self.training_cfg.critic_state == GLOBAL_STATE:  # the state at each step and the one reached after it
            columns = columns | {sb.STATE, sb.NEXT_STATE}
        return columns

    def group_options(self, policy_id: str) -> dict:
        """The group's agents and the global state's width: read from the env, not training keys."""
        options = {"agent_indices": self.agent_groups()[policy_id]}
        if self.training_cfg.critic_state == GLOBAL_STATE:
            options["state_dim"] = self.global_state_spec()["dim"]
        return options

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        model = dict(plan.model)
        if plan.module_class == self.default_module_class:
            model.update(self.group_options(policy_id))
        return replace(plan, model=model, group_agent_indices=self.agent_groups().get(policy_id))


class MASACConfig(CentralisedGroups, SACConfig):
    algo_name = "MASAC"
    # simple_spread with continuous actions: a random team scores about -80 summed over the agents
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-66, budget=20_000, window=3,
            overrides=("environment.env_config.continuous_actions=true",),
            measured="-65.7 (3-iteration mean) at 12k env steps, 84 s",
        ),
    )
    training_section_cls = MASACTraining
    model_options = SACConfig.model_options + GROUP_MODEL_OPTIONS
    capabilities = Capabilities(action_spaces=DISCRETE | BOX, recurrent=False, overlap=False,
                                mixed_family=None)

    def algorithm_parts(self):
        return MASACParts()
