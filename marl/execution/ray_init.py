"""Connecting to Ray: the one place a process joins a cluster or starts a local instance."""

from __future__ import annotations

import os


def ensure_ray(num_cpus: int | None = None, runtime_env: dict | None = None) -> None:
    """Joins RAY_ADDRESS if set, else starts a local Ray (never a stale cluster left by a killed run).

    `runtime_env`: the job's (the user's modules, `marl.execution.user_code.job_runtime_env`)."""
    import ray

    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True, runtime_env=runtime_env)
    else:
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, runtime_env=runtime_env)
