"""MATConfig: the Multi-Agent Transformer (Wen et al., NeurIPS 2022) trained with PPO's clipped loss.

One policy acts for every agent (all agents must share their observation and action spaces): its encoder reads
all agents' observations at the env step, its decoder emits their actions one after another
(`marl.algorithms.mat.module`). The encoder's tokens are the agents' own observations, joined as the global
state (`state`: always the joined observations here, never the env's `state()`, whose layout is the env's own).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import gymnasium as gym

from marl.algorithms.canonical import CanonicalTask
from marl.algorithms.mat.loss import LOSS_COLUMNS, mat_loss, team_actions
from marl.algorithms.ppo.config import PPOConfig, PPOParts, PPOTraining
from marl.config.capabilities import Capabilities
from marl.config.checks import doc
from marl.errors import ConfigError
from marl.data import sample_batch as sb
from marl.modules.spaces import observation_part
from marl.runners.global_state import JOINED_OBS
from marl.workflow.graphs import synchronous_workflow


@dataclass
class MATTraining(PPOTraining):
    lr: float = doc("Adam learning rate", 1e-3, min=0)
    gae_lambda: float = doc("GAE lambda", 0.95, min=0, max=1)
    vf_loss_coeff: float = doc("value loss weight", 0.5, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 0.5, min=0)
    minibatch_size: int = doc("agent rows per SGD minibatch (each row decodes its env step's whole team)", 512, min=1, at_most="train_batch_size")
    num_epochs: int = doc("passes over each train batch", 5, min=1)
    entropy_coeff: float = doc("entropy bonus weight", 0.01, min=0)
    popart: bool = doc("PopArt value normalisation of the encoder's value head (marl.modules.popart; MAT normalises its "
                       "values too)", True)
    model: dict = doc("the transformer's options: embed_dim, num_heads, num_blocks, autoregressive (false: the "
                      "agents' actions decoded independently, the ablation), initial_log_std (Box)",
                      default_factory=lambda: {"embed_dim": 64, "num_heads": 1, "num_blocks": 1})


class MATParts(PPOParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(mat_loss)
    prepare = staticmethod(team_actions)


class MATConfig(PPOConfig):
    algo_name = "MAT"
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-70, budget=75_000, window=3,
            measured="-69.5 (3-iteration mean) first at 41k env steps on seed 1, -68.3 at best by 82k; decoding the "
                     "agents independently (model.autoregressive false): first at 94k (-73.5 at 41k); teacher forcing "
                     "off by one (position m reads its own action): -79.8 at 72k",
        ),
    )
    training_section_cls = MATTraining
    capabilities = Capabilities(action_spaces=frozenset({"Discrete", "Box"}), recurrent=False,
                                overlap=False, mixed_family=None, batched=False,
                                note="one policy for all agents (alike spaces); the encoder reads the agents' joined observations")
    default_module_class = "marl.algorithms.mat.module:MATModule"
    sample_columns = PPOConfig.sample_columns | {sb.STATE}

    def global_state_spec(self) -> dict | None:
        """The agents' observations joined (the encoder's tokens), whether or not the env has a `state()`."""
        spec = self.env_spec()
        widths = [int(gym.spaces.flatdim(observation_part(spec.observation_space(a)))) for a in spec.possible_agents]
        return {"source": JOINED_OBS, "dim": sum(widths), "num_agents": len(widths), "dtype": "float32",
                "token_widths": widths}

    def resolved(self) -> "MATConfig":
        out = super().resolved()
        if len(out.policy_specs()) != 1:
            raise ConfigError(f"MAT decodes every agent's action with one policy, but the config has policies "
                              f"{sorted(out.policy_specs())} (agents that differ in their spaces get one each); declare "
                              "one policy for all agents, with alike observation and action spaces")
        return out

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        if plan.module_class != self.default_module_class:
            return plan
        return replace(plan, model={**plan.model, "token_widths": self.global_state_spec()["token_widths"]})

    def algorithm_parts(self):
        return MATParts()

    def default_workflow(self):
        return synchronous_workflow(self, "mat")
