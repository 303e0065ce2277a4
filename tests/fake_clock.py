"""A stand-in for the `time` module a piece of marl reads: sleeping advances the clock at once and is recorded.

Tests of waits and timeouts patch it in (`monkeypatch.setattr(module, "time", FakeClock())`) and assert the
sleeps taken, so their outcome never depends on how fast or loaded the machine is.
"""

from __future__ import annotations


class FakeClock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def monotonic(self) -> float:
        return self.now

    time = perf_counter = monotonic

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
