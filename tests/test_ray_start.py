"""A local Ray whose node misses Ray's fixed startup wait (a machine loaded far beyond its cores) is started
again, and what the failed start left running is stopped first; any other error is raised at once."""

from __future__ import annotations

import subprocess
import sys

import pytest
import ray

from marl.execution import ray_init


class FlakyInit:
    """ray.init that fails like Ray's node timeout `failures` times, each time leaving a child process behind."""

    def __init__(self, failures: int, message: str = "The current node timed out during startup. This could happen"):
        self.failures, self.message, self.calls, self.left = failures, message, [], []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if len(self.calls) <= self.failures:
            self.left.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))
            raise Exception(self.message)


@pytest.fixture
def flaky(monkeypatch):
    def install(failures, **kw):
        init = FlakyInit(failures, **kw)
        monkeypatch.setattr(ray, "init", init)
        monkeypatch.setattr(ray, "shutdown", lambda: None)
        return init

    yield install


def test_a_node_that_misses_the_startup_wait_is_started_again_and_its_leftovers_stopped(flaky):
    init = flaky(failures=2)
    ray_init.start_local_ray(num_cpus=4, include_dashboard=False)
    assert [c["address"] for c in init.calls] == ["local"] * 3 and init.calls[-1]["num_cpus"] == 4
    assert [p.poll() is not None for p in init.left] == [True, True]  # the failed starts' processes were stopped


def test_it_gives_up_after_its_attempts_and_other_errors_are_not_retried(flaky):
    init = flaky(failures=5)
    with pytest.raises(Exception, match="timed out during startup"):
        ray_init.start_local_ray(attempts=3)
    assert len(init.calls) == 3
    other = flaky(failures=1, message="num_cpus must be an int")
    with pytest.raises(Exception, match="num_cpus must be an int"):
        ray_init.start_local_ray()
    assert len(other.calls) == 1
    for p in init.left + other.left:
        p.kill()
