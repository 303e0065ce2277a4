"""What a lighter `ray.init` buys overlap's start-up: Ray's start and one runner-like actor, per variant.

    .venv/bin/python benchmarks/speed/ray_startup.py [--repeats 3]

With `env_runners.overlap` marl samples on one Ray actor, so a run pays `ray.init` (Ray's own
processes: GCS, raylet, dashboard and runtime-env agents, the minimal API server, monitors) and
the actor's start (a worker process importing marl and torch) before its first result. Each
variant runs in a fresh process, the variants alternating, `--repeats` times: `ray.init` as marl
makes it (`marl.runtime.algorithm.ensure_ray`: local, num_cpus = the machine's, no dashboard),
then one actor with num_cpus=1 that imports marl's env runner, then one call to it. Variants:

* `marl`: ensure_ray's arguments;
* `no-prestart`: Ray does not prestart a worker per CPU for the first driver
  (`_system_config={"prestart_worker_first_driver": False}`): one process fewer, the actor's worker
  starts when the actor is made;
* `small-store`: an 80 MB object store and no usage-stats reporting.

Figures (medians): wall seconds of `ray.init`, of the actor to its first reply, their sum; the
process tree's CPU seconds at that point (the steadier figure on a loaded machine) and its PSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

VARIANTS = {
    "marl": {},
    "no-prestart": {"_system_config": {"prestart_worker_first_driver": False}},
    "small-store": {"object_store_memory": 80 * 2**20, "env": {"RAY_USAGE_STATS_ENABLED": "0"}},
}

CHILD = r"""
import json, os, sys, time
import psutil, ray
extra = json.loads(sys.argv[1])
t0 = time.perf_counter()
ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, **extra)
t1 = time.perf_counter()

@ray.remote(num_cpus=1)
class Runner:
    def __init__(self):
        import marl.runners.env_runner  # noqa: F401  (what a runner actor imports)

    def ping(self):
        return 1

ray.get(Runner.remote().ping.remote())
t2 = time.perf_counter()
me = psutil.Process()
pss = cpu = 0.0
for p in [me, *me.children(recursive=True)]:
    try:
        pss += p.memory_full_info().pss
        times = p.cpu_times()
        cpu += times.user + times.system
    except psutil.Error:
        pass
print(json.dumps({"init_s": t1 - t0, "actor_s": t2 - t1, "total_s": t2 - t0, "cpu_s": cpu, "pss_mb": pss / 2**20}))
ray.shutdown()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"ray_startup: {C.machine_line()}", flush=True)
    runs = {v: [] for v in VARIANTS}
    loads = []
    for repeat in range(args.repeats):
        order = list(VARIANTS)[repeat % len(VARIANTS):] + list(VARIANTS)[: repeat % len(VARIANTS)]
        for name in order:
            extra = dict(VARIANTS[name])
            env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(C.REPO_ROOT), **extra.pop("env", {})}
            loads.append(os.getloadavg()[0])
            out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(extra)], env=env, capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"{name} failed:\n{out.stderr[-3000:]}")
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  repeat {repeat} {name:>12}: {runs[name][-1]['total_s']:.1f} s (load {loads[-1]:.1f})", flush=True)
    keys = ("init_s", "actor_s", "total_s", "cpu_s", "pss_mb")
    rows = [[name, *(C.fmt_num(C.median([r[k] for r in rs])) for k in keys)] for name, rs in runs.items()]
    C.print_table(["variant", "ray.init s", "actor s", "total s", "tree CPU s", "PSS MB"], rows,
                  title=f"medians over {args.repeats} (load avg {min(loads):.1f}-{max(loads):.1f})")


if __name__ == "__main__":
    main()
