"""The operators YAML workflows can name: the built-in table, explicit, plus what users register.

Importing an operator module registers nothing; adding a built-in operator
means adding it to `BUILTIN_OPERATORS` here.
"""

from __future__ import annotations

from marl.workflow.evaluation_ops import Evaluate
from marl.workflow.external_ops import Serve
from marl.workflow.offline_ops import ReadOffline, Record
from marl.workflow.operators import ConcatBatches, Concurrently, Learn, Report, Sample, SyncWeights
from marl.workflow.protocol import Operator
from marl.workflow.replay_ops import Replay, StoreToReplay, UpdatePriorities, UpdateTarget
from marl.workflow.league_ops import LeagueMatches, LeagueSnapshot, Matchmaking
from marl.workflow.self_play_ops import SnapshotOpponents

BUILTIN_OPERATORS: dict[str, type[Operator]] = {
    cls.op_name: cls
    for cls in (
        Sample, ConcatBatches, Learn, SyncWeights, Concurrently, Report,
        StoreToReplay, Replay, UpdatePriorities, UpdateTarget,
        SnapshotOpponents, LeagueMatches, LeagueSnapshot, Matchmaking, Evaluate, Record, ReadOffline, Serve,
    )
}

# Every operator usable by name: the built-ins, then the users' (`register_operator`).
OPERATORS: dict[str, type[Operator]] = dict(BUILTIN_OPERATORS)


def register_operator(cls: type[Operator]) -> type[Operator]:
    """Makes a user's operator class usable by name in YAML workflows (a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Operator)) or not cls.op_name:
        raise TypeError(f"register_operator takes an Operator subclass with an op_name, got {cls!r}")
    if cls.op_name in BUILTIN_OPERATORS and BUILTIN_OPERATORS[cls.op_name] is not cls:
        raise ValueError(f"operator name '{cls.op_name}' is a built-in operator's; choose another op_name")
    OPERATORS[cls.op_name] = cls
    return cls
