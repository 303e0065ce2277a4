"""MAPPOConfig: multi-agent PPO with decentralised actors and a centralised critic.

Runners record the global state at every agent row (`state`: the env's
`state()` where it has one, else the agents' joined observations, see
`marl.runners.global_state`); the critic values that state, both for the
rows' value predictions and for bootstrapping at truncations and fragment
cuts. Parameter sharing follows the policy mapping: map every agent to one
policy (shared) or each agent to its own (per-agent); each policy has its own
critic, all over the same global state.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.mappo.loss import LOSS_COLUMNS, mappo_loss
from marl.algorithms.ppo.config import PPOConfig, PPOParts, PPOTraining
from marl.config.sections import doc
from marl.data import sample_batch as sb
from marl.algorithms.mappo.workflow import mappo_workflow


@dataclass
class MAPPOTraining(PPOTraining):
    agent_id: bool = doc("append a one-hot of the agent's index to the actor's and the critic's inputs", True)
    critic_hiddens: list | None = doc("hidden layers of the centralised critic; null: model.hiddens", None)


class MAPPOParts(PPOParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(mappo_loss)


class MAPPOConfig(PPOConfig):
    algo_name = "MAPPO"
    training_section_cls = MAPPOTraining
    default_module_class = "marl.modules.central_critic:CentralCriticMLP"
    sample_columns = PPOConfig.sample_columns | {sb.STATE}  # the centralised critic's input

    def model_for(self, policy_id: str) -> dict:
        model = super().model_for(policy_id)
        if self.module_class_for(self.policy_specs()[policy_id]) == self.default_module_class:
            spec = self.global_state_spec()
            model.setdefault("state_dim", spec["dim"])
            model.setdefault("num_agents", spec["num_agents"])
            model.setdefault("agent_id", self.training_cfg.agent_id)
            if self.training_cfg.critic_hiddens is not None:
                model.setdefault("critic_hiddens", list(self.training_cfg.critic_hiddens))
        return model

    def algorithm_parts(self):
        return MAPPOParts(decoupled=self.env_runners_cfg.overlap)

    def default_workflow(self):
        return mappo_workflow(self)
