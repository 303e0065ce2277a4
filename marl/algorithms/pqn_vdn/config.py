"""PQNVDNConfig: PQN on a cooperative group's joint steps, Q_tot the sum of the agents' Q values (`loss.py`).

Each policy is one group: the agents mapped to it share its agent Q network (`marl.modules.joint_q`, the VDN
mixer: a sum) and learn from the team reward. Acting is each agent's own epsilon-greedy pass, as PQN's; the
learner joins the group's rows into joint steps before the Q(lambda) returns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from marl.algorithms.algorithm_parts import AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.algorithms.mixing import MixingConfig
from marl.algorithms.pqn import PQNConfig
from marl.algorithms.pqn.config import PQNTraining
from marl.algorithms.pqn_vdn.loss import LOSS_COLUMNS, joint_lambda_returns, pqn_vdn_loss
from marl.config.capabilities import DISCRETE, Capabilities
from marl.config.sections import doc


@dataclass
class PQNVDNTraining(PQNTraining):
    minibatch_size: int = doc("joint steps (env steps of a group) per SGD minibatch", 128, min=1)
    agent_id: bool = doc("append a one-hot of the agent's place in its group to its observation", True)


class PQNVDNParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(pqn_vdn_loss)

    def __init__(self, agent_indices: list[int]):
        self.agent_indices = list(agent_indices)

    def learner_connectors(self, cfg):
        if not self.agent_indices:
            raise ValueError("PQN_VDN's parts need the group's agent indices (config.plan_for(policy_id).parts has them)")
        return [lambda batch: joint_lambda_returns(batch, self.agent_indices, cfg.gamma, cfg.q_lambda)]


class PQNVDNConfig(PQNConfig):
    algo_name = "PQN_VDN"
    # simple_spread (3 agents, 25 steps, discrete): a random team scores about -79 summed over the agents
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-64, budget=60_000, window=3,
            measured="-63.4 (3-iteration mean) at 20.5k env steps, 95 s with the machine at load 15 (seeds 2, 3: "
                     "-63.9 at 20.5k, -63.2 at 22.5k); without LayerNorm: -62.9 at 30.7k (passes)",
        ),
    )
    training_section_cls = PQNVDNTraining
    capabilities = Capabilities(action_spaces=DISCRETE, recurrent=False, overlap=False,
                                mixed_family=None, batched=True)
    default_module_class = "marl.modules.joint_q:JointQModule"
    model_options = PQNConfig.model_options + ("agent_id",)
    agent_groups = MixingConfig.agent_groups  # each policy's env agent indices (one env probe, cached)

    def __init__(self):
        super().__init__()
        self._groups_cache: dict = {}

    def _plan(self, policy_id: str):
        plan = super()._plan(policy_id)
        group = self.agent_groups()[policy_id]
        plan = replace(plan, group_agent_indices=group, parts=PQNVDNParts(group))
        if plan.module_class != self.default_module_class:
            return plan
        return replace(plan, model=dict(plan.model, mixer="vdn", agent_indices=group))

    def algorithm_parts(self):
        """The parts without a group; `_plan` gives each policy its own (its agents' indices)."""
        return PQNVDNParts([])
