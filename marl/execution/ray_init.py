"""Connecting to Ray: the one place a process joins a cluster or starts a local instance."""

from __future__ import annotations

import logging
import os

import psutil

log = logging.getLogger(__name__)

# Ray waits a fixed 30 s for a new node's raylet to register with its GCS (ray/_private/node.py); on a
# machine loaded far beyond its cores that wait can run out while both processes are still starting.
_NODE_START_TIMEOUT = "timed out during startup"
LOCAL_START_ATTEMPTS = 3


def ensure_ray(num_cpus: int | None = None, runtime_env: dict | None = None) -> None:
    """Joins RAY_ADDRESS if set, else starts a local Ray (never a stale cluster left by a killed run).

    `runtime_env`: the job's (the user's modules, `marl.runners.user_code.job_runtime_env`)."""
    import ray

    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True, runtime_env=runtime_env)
    else:
        start_local_ray(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, runtime_env=runtime_env)


def start_local_ray(attempts: int = LOCAL_START_ATTEMPTS, **init_kwargs) -> None:
    """`ray.init(address="local", **init_kwargs)`, started again (up to `attempts` times) when its node does not
    come up within Ray's fixed startup wait; the processes a failed start left are stopped before the next."""
    import ray

    for attempt in range(1, attempts + 1):
        before = _child_pids()
        try:
            ray.init(address="local", **init_kwargs)
            return
        except Exception as err:
            if _NODE_START_TIMEOUT not in str(err) or attempt == attempts:
                raise
            log.warning("local Ray did not start (%s); stopping what it started and trying again (%d of %d)",
                        err, attempt + 1, attempts)
            ray.shutdown()
            _stop_children(_child_pids() - before)


def _child_pids() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _stop_children(pids: set[int]) -> None:
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            proc.kill()
            procs.append(proc)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)
