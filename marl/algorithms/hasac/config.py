"""HASACConfig: heterogeneous-agent soft actor-critic (Zhong et al. 2024): MASAC's centralised twin critics and
temperature, one actor per agent, the actors stepped one after another in a random order each update (`loss.py`).

Each policy is one cooperative group (as MASAC's): its module holds the group's critics and every agent's own
actor (no parameter sharing: the agents may differ in what they learn). Parameter groups, in update order:
`critic`, then `actor_<k>` for the group's agents in the order drawn for the update, then `alpha`; the graph is
MASAC's (joint replay, Polyak target critics). Box or Discrete actions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from marl.algorithms.canonical import CanonicalTask
from marl.algorithms.hasac.loss import actor_loss, alpha_loss
from marl.algorithms.masac import loss as masac_loss
from marl.algorithms.masac.config import MASACConfig, MASACTraining
from marl.algorithms.sac.config import SACParts, group_lr
from marl.config.capabilities import BOX, DISCRETE, Capabilities
from marl.config.sections import doc
from marl.learners.param_groups import ParamGroup

ACTOR_PREFIX = "actor_"  # actor_<k>: the parameter group of the agent in place k of the group


def _own_actor_only(value) -> str | None:
    return "HASAC gives each agent its own actor, updated in turn: it must be false (MASAC shares one)" if value else None


@dataclass
class HASACTraining(MASACTraining):
    shared_actor: bool = doc("each agent has its own actor (HASAC's heterogeneous agents): false only", False,
                             check=_own_actor_only)
    agent_id: bool = doc("unused: HASAC's actors are each agent's own (no one-hot of the agent's place needed)", False)
    fixed_order: bool = doc("update the actors in the group's order every time; false: a random order each update "
                            "(HASAC's)", False)


class HASACParts(SACParts):
    """critic, actor_<k> per agent (in the order `update_order` draws), alpha."""

    def __init__(self, n_agents: int, fixed_order: bool = False):
        self.n_agents, self.fixed_order = int(n_agents), bool(fixed_order)

    def param_groups(self, cfg):
        critic = ParamGroup("critic", masac_loss.critic_loss, lr=group_lr(cfg, "critic"), eps=cfg.adam_eps,
                            grad_clip=cfg.grad_clip, params=lambda m: m.critic_parameters())
        alpha = ParamGroup("alpha", alpha_loss, lr=group_lr(cfg, "alpha"), eps=cfg.adam_eps,
                           params=lambda m: [m.log_alpha])
        return [critic, *(self._actor_group(cfg, k) for k in range(self.n_agents)), alpha]

    @staticmethod
    def _actor_group(cfg, k: int) -> ParamGroup:
        return ParamGroup(f"{ACTOR_PREFIX}{k}", lambda module, batch, cfg, targets: actor_loss(module, batch, cfg, k),
                          lr=group_lr(cfg, "actor"), eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                          params=lambda m: m.actors[k].parameters())

    def update_order(self, groups, rng):
        """The critic first, then the actors in a random order (HASAC's sequential scheme), then the temperature."""
        actors = [g for g in groups if g.name.startswith(ACTOR_PREFIX)]
        if not self.fixed_order:
            actors = [actors[i] for i in rng.permutation(len(actors))]
        rest = [g for g in groups if not g.name.startswith(ACTOR_PREFIX)]
        return [g for g in rest if g.name == "critic"] + actors + [g for g in rest if g.name != "critic"]


class HASACConfig(MASACConfig):
    algo_name = "HASAC"
    # MASAC's task: simple_spread with continuous actions (a random team scores about -80 summed over the agents)
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-66, budget=20_000, window=3,
            overrides=("environment.env_config.continuous_actions=true",),
            measured="-64.4 (3-iteration mean) at 13k env steps (seed 1; seed 2: -64.3 at 14k), 1,848 s and 1,803 s with "
                     "the machine at load 15-25 on 2 cores (about 5 CPU-minutes each: an update steps n + 2 optimisers); actor_lr 0: -74.8 at 20k. "
                     "2026-11-29, with the actors' forwards shared across an update's steps (bit-identical updates): the same "
                     "-64.4 at 13k and -74.8 at 20k, 97 CPU-s (147 s at load 7; the revision before: 102 CPU-s)",
        ),
    )
    training_section_cls = HASACTraining
    capabilities = Capabilities(action_spaces=DISCRETE | BOX, recurrent=False, overlap=False,
                                mixed_family=None, batched=True)

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        group = self.agent_groups()[policy_id]
        return replace(plan, parts=HASACParts(len(group), self.training_cfg.fixed_order))
