"""Which cores each process of a run owns: the CPUs the run's Ray actors ask for, and from them the learner's
torch threads (`learners.num_threads`, when the user leaves it unset).

A learner's updates are most of an iteration at thousands of rows (docs/batched.md: 25.7k env steps/s with one
thread against 40.4k with two on a 2-core machine), so the default takes the cores the learner owns -- and no
more: torch's threads wait on each other at every operation, so a thread on a core another process of the run
holds slows every update. Reads the config's sections only (no config import: the floors above build on this).
"""

from __future__ import annotations

import math
import os
import sys


def requested_cpus(config) -> tuple[float, list[str]]:
    """(CPUs the run's actors ask for, what asks for them in words)."""
    run, learn, ev = config.env_runners_cfg, config.learners_cfg, config.evaluation_cfg
    parts = []
    total = 0.0
    for count, per, what in (
        (run.num_env_runners, run.num_cpus_per_env_runner, "env runners"),
        (ev.evaluation_num_env_runners, run.num_cpus_per_env_runner, "evaluation runners"),
        (learn.num_learners, learn.num_cpus_per_learner, "learners"),
    ):
        if count:
            total += count * per
            parts.append(f"{count} {what} x {per:g} CPU")
    return total, parts


def machine_cores() -> int:
    """The cores this process may run on: its CPU affinity where the OS tells it (a container or `taskset` may
    give fewer than the machine has), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def ray_assigned_cpus() -> float | None:
    """The CPUs Ray reserved for this process when it is a Ray worker (an actor: a Tune trial, a learner actor);
    None in a driver or without Ray (Ray is not imported for it: a process Ray started has it imported)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    if context.worker.mode != ray.WORKER_MODE:
        return None
    return float(context.get_assigned_resources().get("CPU", 0.0))


def learner_threads(config, cores: int | None = None, actor_cpus: float | None = None) -> tuple[int, str]:
    """(torch threads for the learner's updates, why in words). `learners.num_threads` when set; else the cores the
    learner owns: a learner actor's `num_cpus_per_learner`; an in-process learner inside a Ray actor (a Tune
    trial) Ray's CPUs for that actor (`actor_cpus`, looked up when None); an in-process learner in a driver the
    process's cores (`cores`, looked up when None; no more than OMP_NUM_THREADS where set) less the CPUs of the
    run's runner actors, which share the machine with it. At least one thread; a fraction of a core makes none."""
    learn = config.learners_cfg
    if learn.num_threads is not None:
        return int(learn.num_threads), "learners.num_threads"
    if learn.num_learners:
        return _whole(learn.num_cpus_per_learner), "each learner actor's num_cpus_per_learner"
    actor_cpus = ray_assigned_cpus() if actor_cpus is None else actor_cpus
    if actor_cpus is not None:
        return _whole(actor_cpus), "the CPUs Ray assigned this process"
    cores = machine_cores() if cores is None else cores
    owned, counted = "cores owned", f"{cores} cores owned"
    limit = _omp_threads()
    if limit is not None and limit < cores:  # the process's thread budget, set outside (a test worker's, a job's)
        cores = limit
        owned = counted = f"OMP_NUM_THREADS={limit}"
    runners, _ = requested_cpus(config)
    if runners:
        return _whole(cores - runners), f"{counted} less {runners:g} CPUs of runner actors"
    return _whole(cores), owned


def _omp_threads() -> int | None:
    """OMP_NUM_THREADS where it is set to a whole number: torch's own default thread count follows it too."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _whole(cpus: float) -> int:
    return max(1, math.floor(cpus + 1e-9))
