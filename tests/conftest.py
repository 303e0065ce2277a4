"""Shared fixtures: one local Ray instance for the whole session, started only if a test needs it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    import ray

    if not ray.is_initialized():
        # address="local": never join a stale cluster left by a killed run. Logical CPUs are
        # scheduling tokens: 4 lets two runner actors and a learner actor coexist on 2 cores.
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
