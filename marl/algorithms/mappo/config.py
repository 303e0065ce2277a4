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

from dataclasses import dataclass, replace

from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.algorithms.mappo.loss import LOSS_COLUMNS, mappo_loss
from marl.algorithms.ppo.config import PPOConfig, PPOParts, PPOTraining
from marl.config.checks import doc
from marl.data import sample_batch as sb
from marl.algorithms.mappo.workflow import mappo_workflow


@dataclass
class MAPPOTraining(PPOTraining):
    # BenchMARL's MAPPO settings for MPE/VMAS (marl's PPO defaults are CartPole's: with lr 3e-4, 64-row
    # minibatches, 10 epochs and 64x64 MAPPO stayed at random play's -86 on simple_spread for 33k env steps).
    lr: float = doc("Adam learning rate", 1e-3, min=0)
    # PPO picks these by action space (`auto`); MAPPO keeps one set, the one its canonical task was measured with.
    gae_lambda: float = doc("GAE lambda", 0.95, min=0, max=1)
    vf_loss_coeff: float = doc("value loss weight", 0.5, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 0.5, min=0)
    minibatch_size: int = doc("agent rows per SGD minibatch (num_epochs x train_batch_size / minibatch_size SGD steps per update, whatever the number of agents)", 512, min=1, at_most="train_batch_size")
    num_epochs: int = doc("passes over each train batch", 5, min=1)
    entropy_coeff: float = doc("entropy bonus weight", 0.01, min=0)
    model: dict = doc("default model options of every policy: hiddens, activation, conv_filters, ... (the reference's training.model table)", default_factory=lambda: {"hiddens": [128, 128], "activation": "tanh"})
    popart: bool = doc("PopArt value normalisation (marl.modules.popart) of the centralised critic (per policy: model.popart); off: with it the gradient clip of 0.5 no longer scales the policy's step down by the value gradient's share of the norm, and at this lr simple_spread learned slower (-68.7 against -62.0 at 100k env steps)", False)
    agent_id: bool = doc("append a one-hot of the agent's index to the actor's and the critic's inputs", True)
    critic_hiddens: list | None = doc("hidden layers of the centralised critic; null: model.hiddens", None)


class MAPPOParts(PPOParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(mappo_loss)


class MAPPOConfig(PPOConfig):
    algo_name = "MAPPO"
    # simple_spread (3 agents, 25 steps, discrete): a random team scores about -79 summed over the agents
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-70, budget=100_000, window=3,
            measured="-69.5 (3-iteration mean) at 49k env steps, 30 s; lr 0: -80.8 at 100k",
        ),
    )
    training_section_cls = MAPPOTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=True,
                                mixed_family="on_policy", self_play=True)
    default_module_class = "marl.modules.central_critic:CentralCriticMLP"
    sample_columns = PPOConfig.sample_columns | {sb.STATE}  # the centralised critic's input
    model_options = ("popart", "agent_id", "critic_hiddens")

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        model = dict(plan.model)
        if plan.module_class == self.default_module_class:
            spec = self.global_state_spec()
            model.setdefault("state_dim", spec["dim"])
            model.setdefault("num_agents", spec["num_agents"])
            if spec.get("frame"):  # the state is the agents' frames joined: the critic reads them through a conv stack
                model.setdefault("state_frame", spec["frame"])
        return replace(plan, model=model)

    def algorithm_parts(self):
        return MAPPOParts(decoupled=self.env_runners_cfg.overlap)

    def default_workflow(self):
        return mappo_workflow(self)
