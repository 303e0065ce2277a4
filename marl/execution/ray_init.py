"""Connecting to Ray: the one place a process joins a cluster or starts a local instance."""

from __future__ import annotations

import logging
import os
import sys
import tempfile

import psutil

from marl.errors import ClusterError

log = logging.getLogger(__name__)

# What Ray's core logs, once a second for about 20 s, when a cluster refuses a process without its token.
MISSING_TOKEN = "InvalidAuthToken"

# Ray waits a fixed 30 s for a new node's raylet to register with its GCS (ray/_private/node.py); on a
# machine loaded far beyond its cores that wait can run out while both processes are still starting.
_NODE_START_TIMEOUT = "timed out during startup"
LOCAL_START_ATTEMPTS = 3


def ensure_ray(num_cpus: int | None = None, runtime_env: dict | None = None) -> None:
    """Joins RAY_ADDRESS if set, else starts a local Ray (never a stale cluster left by a killed run).

    `runtime_env`: the job's (the user's modules, `marl.execution.user_code.job_runtime_env`).
    A cluster that refuses to be joined is a `ClusterError` in one line: for a missing authentication
    token it names `RAY_AUTH_MODE=token` (the lines Ray's core logs while it retries are held back)."""
    import ray

    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        start_local_ray(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, runtime_env=runtime_env)
        return
    with _StderrHeld() as held:
        try:
            ray.init(address=address, log_to_driver=True, runtime_env=runtime_env)
        except (ConnectionError, ray.exceptions.RayError) as err:
            held.drop = MISSING_TOKEN in held.text() or isinstance(err, getattr(ray.exceptions, "AuthenticationError", ()))
            if held.drop:
                raise ClusterError(
                    f"the Ray cluster at {address} refused this process: it requires an authentication token and none "
                    "was sent; export RAY_AUTH_MODE=token, with the cluster's token in ~/.ray/auth_token (`ray "
                    "get-auth-token` prints it on the head node) or in RAY_AUTH_TOKEN"
                ) from None
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            held.drop = True
            raise ClusterError(f"cannot join the Ray cluster at {address}: {first} (is `ray start` running there, "
                               "and is the address HOST:PORT of its GCS, as `ray start --head` printed?)") from None


class _StderrHeld:
    """Holds what is written to file descriptor 2 (Python's and Ray's C++ logging alike) and writes it out at
    the end unless `drop` was set: so a refused connection's retry lines can give way to one line."""

    def __init__(self):
        self.drop = False

    def __enter__(self):
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def text(self) -> str:
        sys.stderr.flush()
        self._file.seek(0)
        return self._file.read().decode(errors="replace")

    def __exit__(self, *exc):
        text = self.text()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.close()
        if not self.drop and text:
            sys.stderr.write(text)
            sys.stderr.flush()
        return False


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
