"""The operator contract: what a node of a workflow graph declares and does.

    class Operator:
        op_name: str                    its name in YAML workflows
        consumes: tuple[str, ...]       the edge kind of each input, in order; () for a source
        optional_inputs: int = 0        how many of the last `consumes` may be left unconnected
        variadic: bool = False          any number (>= 1) of inputs of kind consumes[0]
        produces: str                   the kind of record it emits (`marl.data.records`)
        may_skip: bool = False          it may emit SKIP (nothing this time) instead of a record
        handles_skip: bool = False      it passes SKIP on (or drops it); needed where an input may carry SKIP
        build(ctx, inputs) -> LocalIterator   its iterator over records, from its inputs' iterators;
                                        every build starts from fresh state
        get_state() -> dict | None      what a checkpoint keeps of it (None: nothing, the default); called as
                                        each checkpoint is taken (record publishes its open files then)
        set_state(state)                continues from get_state()'s output (after a fresh build)
        check_inputs(kinds) -> str|None a reason the inputs do not fit beyond `consumes` (validation)
        close()                         releases what it holds open (files) when the algorithm stops

Settings are the keyword parameters of `__init__` (stored under the same
names): that is what YAML nodes set and what `params()` shows. The graph
checks every emitted item against its kind's record type and against
`may_skip`; it collects operator state for checkpoints through
`get_state`/`set_state` alone; and it gives every branch of a fan-out its
own copy of each record.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from marl.execution import LocalIterator, SharedMetrics
from marl.learners.group import LearnerGroup
from marl.runners.group import EnvRunnerGroup


@dataclass
class ExecutionContext:
    """What operators act on: the runtime objects of one Algorithm."""

    config: object
    runners: EnvRunnerGroup  # its runners keep the runner contract (`marl.workflow.runner_protocol`)
    learners: LearnerGroup
    metrics: SharedMetrics
    replay_buffers: dict = field(default_factory=dict)  # policy id -> ReplayBuffer (off-policy algorithms)
    evaluation: object = None  # marl.runtime.evaluation.Evaluation: the evaluation runners, built on first use
    # Resolved once by Algorithm on its probe env (operators make no env to learn them): policy id -> PolicySpec
    # with its spaces, policy id -> the agents it acts for, and the env's possible agents.
    policy_specs: dict = field(default_factory=dict)
    agents_of: dict = field(default_factory=dict)
    possible_agents: list = field(default_factory=list)
    # name -> object with get_state()/set_state(state) that checkpoints keep (replay buffers, operator state, ...).
    # State trees hold dicts, lists, numbers, strings and arrays (see state_files).
    checkpointables: dict = field(default_factory=dict)


def operator_param_names(cls) -> list[str]:
    """The settings an operator takes: its __init__ keyword parameters."""
    if cls.__init__ is object.__init__:
        return []
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


class Operator:
    op_name: str = ""
    consumes: tuple[str, ...] = ()
    optional_inputs: int = 0
    variadic: bool = False
    produces: str = ""
    may_skip: bool = False
    handles_skip: bool = False

    def build(self, ctx: ExecutionContext, inputs: list[LocalIterator]) -> LocalIterator:
        raise NotImplementedError

    def get_state(self) -> dict | None:
        return None

    def set_state(self, state: dict) -> None:
        raise TypeError(f"operator {self.op_name} keeps no state, but was given some")

    def check_inputs(self, kinds: list[str]) -> str | None:
        return None

    def end(self, reason: str) -> None:
        """The run is over (`reason`: why); called before `close`. Operators facing the outside (the policy
        server's clients) tell it why here."""
        return None

    def close(self) -> None:
        return None

    def params(self) -> dict:
        return {name: getattr(self, name) for name in operator_param_names(type(self))}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


def policy_list(node: str, policies) -> list[str] | None:
    """The `policies` setting of a per-policy branch's node: null (all) or a non-empty list of policy ids."""
    if policies is None:
        return None
    if isinstance(policies, str):
        policies = [policies]
    if not isinstance(policies, (list, tuple)) or not policies:
        raise ValueError(f"{node}.policies must be a non-empty list of policy ids or null (all), got {policies!r}")
    return [str(p) for p in policies]
