"""Workflow: operators, the graph, validation, compilation into iterators, YAML form."""

from marl.workflow.graph import Workflow, WorkflowError, make_operator
from marl.workflow.operators import (
    OPERATORS,
    ConcatBatches,
    Concurrently,
    ExecutionContext,
    Learn,
    Operator,
    Report,
    Sample,
    SyncWeights,
    register_operator,
)

__all__ = [
    "OPERATORS",
    "ConcatBatches",
    "Concurrently",
    "ExecutionContext",
    "Learn",
    "Operator",
    "Report",
    "Sample",
    "SyncWeights",
    "Workflow",
    "WorkflowError",
    "make_operator",
    "register_operator",
]
