"""An env that sends a signal at a chosen env step (a scheduler's preemption at a known point of a run).

`env: tests.signal_envs`, `env_config: {pid: P, at_step: S}`: the S-th step of this env copy (counted over its
episodes) sends SIGTERM (or `signum`) to process P, then steps on (`again_at`: a second one); pid 0 sends nothing. Used by
tests/test_preemption.py: the signal lands mid-iteration at a step the test knows, not at a time.
"""

from __future__ import annotations

import os
import signal

from tests.bad_envs import BadEnv


class SignallingEnv(BadEnv):
    def __init__(self, pid: int = 0, at_step: int = 0, signum: int = int(signal.SIGTERM), again_at: int = 0):
        super().__init__("none")
        self.pid, self.signal_at, self.signum, self.steps = pid, (at_step, again_at), signum, 0

    def step(self, actions):
        self.steps += 1
        if self.pid and self.steps in self.signal_at:
            os.kill(self.pid, self.signum)
        return super().step(actions)


def parallel_env(pid: int = 0, at_step: int = 0, signum: int = int(signal.SIGTERM), again_at: int = 0):
    return SignallingEnv(pid, at_step, signum, again_at)
