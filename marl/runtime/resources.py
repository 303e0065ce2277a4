"""What a run asks Ray for, checked before Ray is asked.

Ray queues an actor whose CPUs no node can give, and waits for ever; a run that
asks for 64 env runners on a 2-CPU machine would hang at its first call. So the
CPUs of every actor the config starts (env runners, evaluation runners,
learners) are added up and compared with the cluster's before any actor is
made: a local Ray that is short fails at once, naming what was asked and what
exists; a cluster joined through RAY_ADDRESS (which may autoscale) is given
`env_runners.resource_wait_s` seconds to grow, with a message, then fails the
same way.
"""

from __future__ import annotations

import logging
import math
import os
import time

from marl.errors import ConfigError
from marl.execution.cores import requested_cpus

log = logging.getLogger(__name__)


def uses_ray(config) -> bool:
    return (config.env_runners_cfg.num_env_runners > 0 or config.learners_cfg.num_learners > 0
            or config.evaluation_cfg.evaluation_num_env_runners > 0)


def local_cpus() -> int:
    """The CPUs a local Ray started by marl gets: the machine's."""
    return os.cpu_count() or 1


def _advice() -> str:
    return ("lower env_runners.num_env_runners / learners.num_learners, or give each a fraction of a CPU "
            "(env_runners.num_cpus_per_env_runner=0.5 lets two runners share a core)")


def check_local_request(config) -> None:
    """Before marl starts a local Ray: the request must fit this machine (Ray would wait for ever)."""
    asked, parts = requested_cpus(config)
    have = local_cpus()
    if asked > have + 1e-9:
        raise ConfigError(
            f"the run asks Ray for {asked:g} CPUs ({' + '.join(parts)}) but this machine has {have}; {_advice()}"
        )


def check_cluster_request(config, wait_s: float | None = None, poll_s: float = 2.0) -> None:
    """Once Ray is up: the request must fit the cluster's CPUs; a joined cluster gets `wait_s` to grow."""
    import ray

    asked, parts = requested_cpus(config)
    if asked <= 0:
        return
    wait_s = config.env_runners_cfg.resource_wait_s if wait_s is None else wait_s
    have = float(ray.cluster_resources().get("CPU", 0.0))
    if asked <= have + 1e-9:
        return
    joined = bool(os.environ.get("RAY_ADDRESS"))
    if joined and wait_s > 0:
        log.warning(
            "the run asks for %g CPUs (%s); the cluster has %g: waiting up to %.0f s for it to grow "
            "(env_runners.resource_wait_s)", asked, " + ".join(parts), have, wait_s,
        )
        print(f"marl: waiting up to {wait_s:.0f} s for the cluster to provide {asked:g} CPUs (it has {have:g})", flush=True)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
            have = float(ray.cluster_resources().get("CPU", 0.0))
            if asked <= have + 1e-9:
                return
    where = f"the cluster has {have:g}" + (f" after waiting {wait_s:.0f} s (env_runners.resource_wait_s)" if joined else "")
    raise ConfigError(f"the run asks Ray for {asked:g} CPUs ({' + '.join(parts)}) but {where}; {_advice()}")


def local_ray_cpus(config) -> int:
    """num_cpus of the local Ray marl starts: the machine's, or the request rounded up when it fits."""
    asked, _ = requested_cpus(config)
    return max(int(math.ceil(asked)), local_cpus())
