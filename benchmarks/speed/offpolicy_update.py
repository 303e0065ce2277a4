"""One learner update of the off-policy actor-critics (HASAC, MASAC, SAC) at their defaults, this tree against a
baseline revision, side by side.

    .venv/bin/python benchmarks/speed/offpolicy_update.py [--before REV] [--algos HASAC,MASAC,SAC-Pendulum] [--repeats 3]
                                                    [--updates 40]

Each run is a fresh process (OMP_NUM_THREADS=1, as the test workers run) that builds the algorithm on its
defaults test's task (`canonical_tasks`: HASAC and MASAC on continuous simple_spread, SAC on Pendulum-v1 or
CartPole-v1) with seed 1, trains until the first learner update and keeps that update's replayed batch
(`train_batch_size` rows), then reseeds torch and the learner's generator and runs `--updates` updates on it
after 3 warm-up ones. It prints the process's CPU time per update (the steadier figure on a loaded machine:
it leaves out the time the process waited for a core), the wall time, a SHA-1 of the module's weights after
the updates, and the multiply-accumulates of one more update's matrix products (mm and addmm, forward and
backward, counted by a dispatch mode: the work, whatever the load). The runs of one repeat go back to back, this tree and `--before REV` (exported with
`git archive` into a temporary folder), their order rotating with the repeat. Reports the median per
update and this tree / REV; `same weights` says whether both trees' updates gave bit-identical weights
(same math, same random draws in the same order: a change that only removes repeated work keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

TASKS = {  # name -> (algo, env, overrides): each one's defaults-test task
    "HASAC": ("HASAC", "mpe2.simple_spread_v3", ["environment.env_config.continuous_actions=true"]),
    "MASAC": ("MASAC", "mpe2.simple_spread_v3", ["environment.env_config.continuous_actions=true"]),
    "SAC-Pendulum": ("SAC", "Pendulum-v1", []),
    "SAC-CartPole": ("SAC", "CartPole-v1", []),
}

CHILD = r"""
import hashlib, json, sys, time
import numpy as np
import torch
from marl.algorithms import config_from_dict
algo_name, env, overrides, updates = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
algo = config_from_dict({"algo": algo_name, "environment": {"env": env}}, overrides + ["debugging.seed=1"]).build()
try:
    learner = algo.learners.local
    captured, update = [], learner.update
    def keep(batch, *args, **kwargs):
        if not captured:
            captured.append(batch)
        return update(batch, *args, **kwargs)
    learner.update = keep
    while not captured:
        algo.train()
    learner.update = update
    torch.manual_seed(0)
    learner.rng = np.random.default_rng(0)
    for _ in range(3):
        learner.update(captured[0])
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(updates):
        learner.update(captured[0])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    digest = hashlib.sha1()
    for name, value in sorted(learner.module.state_dict().items()):
        digest.update(name.encode()); digest.update(value.detach().cpu().numpy().tobytes())
    from torch.utils._python_dispatch import TorchDispatchMode
    class CountMacs(TorchDispatchMode):  # multiply-accumulates of the matrix products, forward and backward
        macs = 0
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.__name__.split(".")[0] in ("mm", "addmm"):
                a, b = args[-2], args[-1]
                CountMacs.macs += a.shape[0] * a.shape[1] * b.shape[1]
            return func(*args, **(kwargs or {}))
    with CountMacs():  # one more update, after the digest
        learner.update(captured[0])
    print(json.dumps({"cpu_ms": 1000 * cpu / updates, "wall_ms": 1000 * wall / updates, "mmacs": CountMacs.macs / 1e6,
                      "weights": digest.hexdigest()[:12]}), flush=True)
finally:
    algo.stop()
"""


def run_child(root: Path, task: str, updates: int) -> dict:
    algo, env, overrides = TASKS[task]
    return C.run_in_tree(root, CHILD, [algo, env, json.dumps(overrides), str(updates)], task)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default=None, help="a git revision to measure beside this working tree")
    ap.add_argument("--algos", default="HASAC,MASAC,SAC-Pendulum", help=f"comma-separated, of {sorted(TASKS)}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--updates", type=int, default=40, help="timed updates per run (after 3 warm-up ones)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"offpolicy_update: {C.machine_line()}", flush=True)
    trees = {"this tree": C.REPO_ROOT}
    if args.before:
        trees[f"before ({args.before})"] = C.export_revision(args.before)
    tasks = [t.strip() for t in args.algos.split(",") if t.strip()]
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        sys.exit(f"unknown --algos {unknown}; known: {sorted(TASKS)}")
    jobs = [(tree, task) for task in tasks for tree in trees]
    runs: dict[tuple[str, str], list[dict]] = {job: [] for job in jobs}
    loads = []
    for repeat in range(args.repeats):
        for task in tasks:
            order = list(trees) if repeat % 2 == 0 else list(reversed(trees))
            for tree in order:
                loads.append(os.getloadavg()[0])
                row = run_child(trees[tree], task, args.updates)
                runs[(tree, task)].append(row)
                print(f"  repeat {repeat} {task:>12} {tree:>20}: {row['cpu_ms']:.1f} ms CPU, {row['wall_ms']:.1f} ms wall "
                      f"per update, {row['mmacs']:.0f}M matmul MACs, weights {row['weights']} (load {loads[-1]:.1f})", flush=True)

    def med(tree, task, figure):
        return C.median([r[figure] for r in runs[(tree, task)]])

    rows = [[task, tree, f"{med(tree, task, 'cpu_ms'):.1f}", f"{med(tree, task, 'wall_ms'):.1f}",
             f"{med(tree, task, 'mmacs'):.0f}"] for tree, task in jobs]
    C.print_table(["task", "tree", "CPU ms / update", "wall ms / update", "matmul MMACs / update"], rows,
                  title=f"median over {args.repeats} runs x {args.updates} updates (load avg {min(loads):.1f}-{max(loads):.1f})")
    if args.before:
        before = next(t for t in trees if t != "this tree")
        ratios = []
        for task in tasks:
            same = {r["weights"] for r in runs[("this tree", task)] + runs[(before, task)]}
            ratios.append([task, f"{med('this tree', task, 'cpu_ms') / med(before, task, 'cpu_ms'):.3f}",
                           f"{med('this tree', task, 'wall_ms') / med(before, task, 'wall_ms'):.3f}",
                           f"{med('this tree', task, 'mmacs') / med(before, task, 'mmacs'):.3f}",
                           "yes" if len(same) == 1 else "no"])
        C.print_table(["task", "CPU this / before", "wall this / before", "matmul MACs", "same weights"], ratios,
                      title="ratios (lower is faster)")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": C.machine_line(), "args": vars(args), "loads": loads,
                                               "runs": {f"{t}|{a}": v for (t, a), v in runs.items()}}, indent=1))


if __name__ == "__main__":
    main()
