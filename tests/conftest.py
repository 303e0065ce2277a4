"""Shared fixtures: one local Ray instance for the whole session, started only if a test needs it.

Under pytest-xdist (`-n 2`, as the README's test command runs) each worker is its own session (its own Ray
instance, if its files need one). Every session trains with one torch thread, as do the commands its tests start:
two workers with torch's default thread count each would oversubscribe the 2 cores they share, and a learning
test's numbers depend on the thread count (sums split over threads round differently): the league test that
passes in the suite failed run alone with two threads (2 snapshots, not >= 3), so a file run on its own
(`-n 0`, to debug it) now trains as it does in the suite.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # subprocesses (CLI tests, `marl serve`, Ray workers) inherit it
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def ray_session():
    import ray

    from marl.execution.ray_init import start_local_ray

    if ray.is_initialized():
        # Started by an earlier test without this fixture (Ray Data reading a recording starts one with the machine's
        # cores): the tests here count on this fixture's instance, so it replaces that one.
        ray.shutdown()
    # address="local": never join a stale cluster left by a killed run. Logical CPUs are
    # scheduling tokens: 4 lets two runner actors and a learner actor coexist on 2 cores.
    # start_local_ray: a node that misses Ray's 30 s startup wait on a loaded machine is started again.
    start_local_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
