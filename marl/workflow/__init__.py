"""Workflow: operators, the records on their edges, the graph, validation, compilation into iterators, YAML form."""

from marl.data.records import SKIP, EvaluationRun, LearnResults, SampledBatch, Stored
from marl.workflow.evaluation_ops import Evaluate
from marl.workflow.graph import Workflow, WorkflowError, make_operator
from marl.workflow.graphs import synchronous_workflow
from marl.workflow.operators import ConcatBatches, Concurrently, Learn, Report, Sample, SyncWeights
from marl.workflow.protocol import ExecutionContext, Operator
from marl.workflow.replay_ops import Replay, StoreToReplay, UpdatePriorities, UpdateTarget
from marl.workflow.league_ops import LeagueMatches, LeagueSnapshot, Matchmaking
from marl.workflow.self_play_ops import SnapshotOpponents
from marl.workflow.table import BUILTIN_OPERATORS, OPERATORS, register_operator

__all__ = [
    "BUILTIN_OPERATORS",
    "OPERATORS",
    "SKIP",
    "ConcatBatches",
    "Concurrently",
    "Evaluate",
    "EvaluationRun",
    "ExecutionContext",
    "Learn",
    "LearnResults",
    "Operator",
    "Replay",
    "Report",
    "Sample",
    "SampledBatch",
    "SnapshotOpponents",
    "LeagueMatches",
    "LeagueSnapshot",
    "Matchmaking",
    "StoreToReplay",
    "Stored",
    "SyncWeights",
    "UpdatePriorities",
    "UpdateTarget",
    "Workflow",
    "WorkflowError",
    "make_operator",
    "register_operator",
    "synchronous_workflow",
]
