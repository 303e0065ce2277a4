"""PolicyPlan: what one policy needs from the algorithm that trains it, the answer to `config.plan_for(policy_id)`.

Runners, connectors, learners, replay, checkpoints, the policy server and the MIXED graph read these
fields instead of asking the config one hook at a time; MIXED hands out the plan of each policy's own
algorithm (`MixedConfig._plan`). An algorithm folder changes its plans in one place, its config's
`_plan(policy_id)` (`super()._plan(policy_id)` and `dataclasses.replace`); a new per-policy capability
is one field here plus the folder that sets it and the code that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from marl.config.capabilities import Capabilities


@dataclass(frozen=True)
class PolicyPlan:
    module_class: type | str | None  # the class its module is built with: the policy's own, else the algorithm's (None: ActorCriticMLP)
    model: dict  # the options handed to that class: the algorithm's `training.model` and its defaults, under the policy's own
    training: Any  # the training section its losses, optimisers and schedules read (the policy's own algorithm's in MIXED)
    parts: Any  # its `AlgorithmParts` (marl.algorithms.algorithm_parts): losses, parameter groups, target copies, minibatching
    columns: frozenset[str]  # what runners record for it beyond obs/actions/rewards/flags (`marl.runners.collector.REQUESTABLE`)
    replay: dict | None  # `make_replay_buffer` keyword arguments of its buffer; None: it keeps none
    target_update: Callable[[float], tuple[int, float]]  # learner updates per sampling round -> (every_env_steps, tau)
    unsquash_actions: bool  # Box actions rescaled from [-1, 1] to the env's bounds (the `unsquash_actions` piece)
    burn_in: int  # recurrent replay: steps before each training sequence that only warm its state up (R2D2); 0: none
    group_agent_indices: list[int] | None  # env agent indices whose joint steps it stores (VDN, QMIX, MASAC); None: per agent
    algo_name: str  # the algorithm that trains it (in MIXED, the policy's own)
    capabilities: Capabilities  # that algorithm's record: what validation checks the policy against (marl.config.capabilities)
    burn_in_grad: bool = False  # True: gradients flow through the burn-in steps; False (R2D2's): the state they warm up is detached
