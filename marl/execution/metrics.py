"""Counters, timers and episode records shared by the operators of one workflow.

The counter names are defined here once; every algorithm reports them with
the same meaning.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

# Counter names (per-policy counters append "/<policy id>").
ENV_STEPS_SAMPLED = "env_steps_sampled"
AGENT_STEPS_SAMPLED = "agent_steps_sampled"
ENV_STEPS_TRAINED = "env_steps_trained"
AGENT_STEPS_TRAINED = "agent_steps_trained"
LEARNER_UPDATES = "learner_updates"
WEIGHTS_VERSION = "weights_version"
WEIGHTS_SYNCS = "weights_syncs"
TARGET_UPDATES = "target_updates"
REPLAY_ADDED = "replay_transitions_added"


class TimerStat:
    """Total and last duration of a repeated section."""

    __slots__ = ("total_s", "count", "last_s")

    def __init__(self):
        self.total_s, self.count, self.last_s = 0.0, 0, 0.0

    @contextmanager
    def timing(self):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.last_s = time.perf_counter() - start
            self.total_s += self.last_s
            self.count += 1


class SharedMetrics:
    def __init__(self):
        self.counters: dict[str, int] = defaultdict(int)
        self.timers: dict[str, TimerStat] = defaultdict(TimerStat)
        self.episodes: list[dict] = []  # finished since the last report

    def drain_episodes(self) -> list[dict]:
        episodes, self.episodes = self.episodes, []
        return episodes
