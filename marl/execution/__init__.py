"""Execution: lazy parallel iterators over Ray actors, and the metrics they share."""

from marl.execution.iterators import GatherAhead, LocalIterator, gather_async, gather_sync, union
from marl.execution.metrics import SharedMetrics, TimerStat

__all__ = ["GatherAhead", "LocalIterator", "SharedMetrics", "TimerStat", "gather_async", "gather_sync", "union"]
