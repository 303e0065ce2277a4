"""Execution: lazy parallel iterators over Ray actors, the metrics they share, starting Ray and shipping the user's
code to its workers (`user_code`)."""

from marl.execution.iterators import GatherAhead, LocalIterator, gather_async, gather_sync, union
from marl.execution.metrics import SharedMetrics, TimerStat

__all__ = ["GatherAhead", "LocalIterator", "SharedMetrics", "TimerStat", "gather_async", "gather_sync", "union"]
