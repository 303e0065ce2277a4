"""Workflow: operators, the graph, validation, compilation into iterators, YAML form."""

from marl.workflow.graph import Workflow, WorkflowError, make_operator
from marl.workflow.operators import (
    OPERATORS,
    ConcatBatches,
    Concurrently,
    ExecutionContext,
    Learn,
    LearnResults,
    Operator,
    Report,
    Sample,
    SyncWeights,
    register_operator,
)
from marl.workflow.replay_ops import Replay, StoreToReplay, UpdatePriorities, UpdateTarget

__all__ = [
    "OPERATORS",
    "ConcatBatches",
    "Concurrently",
    "ExecutionContext",
    "Learn",
    "LearnResults",
    "Operator",
    "Replay",
    "Report",
    "Sample",
    "StoreToReplay",
    "SyncWeights",
    "UpdatePriorities",
    "UpdateTarget",
    "Workflow",
    "WorkflowError",
    "make_operator",
    "register_operator",
]
