"""Do the defaults hold what they learn? Every online canonical task, run on to several times its budget.

    .venv/bin/python benchmarks/studies/defaults_hold.py [--factor 3] [--algos PPO QMIX SAC:Pendulum-v1 ...] [--jobs 2]

Each registered algorithm's online canonical tasks (`canonical_tasks` on its config class; offline ones are
judged over their whole budget already) run exactly as `tests/test_defaults_learn*.py` runs them
(`marl.algorithms.canonical_run.run_canonical`, the task's seed, one torch thread a process): until the metric
first reaches the threshold, then on to `--factor` x the budget (or the task's own `hold` where it is longer).
A row says where the threshold was first reached, the metric over the last `hold_window` iterations, the worst
`hold_window`-iteration mean after reaching, and whether the run held its threshold (`hold_threshold` where the
task declares one). The defaults test checks such a hold only where a task declares it (QMIX): a hold of 3x
every budget would more than double the suite's learning time, so this study asks it of all of them.
Learning, not speed: no baseline; wall seconds are for sizing runs.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl  # noqa: F401  (registers marl's envs)
from marl.algorithms.canonical_run import run_canonical, window_mean
from marl.config.registry import discovered


def online_tasks(algos: list[str] | None) -> list[tuple[str, object]]:
    """The online canonical tasks of the named algorithms (all without names); `NAME:ENV` picks one of them."""
    tasks = [(name, task) for name, cls in discovered().items()
             for task in cls.__dict__.get("canonical_tasks") or () if task.data is None]
    wanted = [tuple((a.split(":", 1) + [None])[:2]) for a in algos or ()]  # (name, env or None)

    def matches(want: tuple, name: str, task) -> bool:
        return name == want[0] and want[1] in (None, task.env)

    chosen = [(name, task) for name, task in tasks if not wanted or any(matches(w, name, task) for w in wanted)]
    unknown = sorted(":".join(filter(None, w)) for w in wanted if not any(matches(w, n, t) for n, t in chosen))
    if unknown:
        raise SystemExit(f"--algos: no online canonical task for {unknown}; known: "
                         f"{sorted(f'{n}:{t.env}' for n, t in tasks)}")
    return chosen


def run_one(name: str, task, factor: float) -> dict:
    import torch

    torch.set_num_threads(1)
    hold = max(task.hold, int(factor * task.budget))
    t0 = time.perf_counter()
    run = run_canonical(name, task, task.seeds[0], hold=hold)
    after = [score for steps, score in run.curve if steps > run.steps]
    w = task.hold_window
    windows = [window_mean(after[i:i + w]) for i in range(max(0, len(after) - w + 1))]
    worst = min((m for m in windows if not math.isnan(m)), default=float("nan"))
    return {"name": name, "task": task, "hold": hold, "run": run, "worst": worst, "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--factor", type=float, default=3.0, help="hold to this many times each task's budget")
    ap.add_argument("--algos", nargs="*", default=None,
                    help="registered names, or NAME:ENV for one of an algorithm's tasks (default: every online task)")
    ap.add_argument("--jobs", type=int, default=1, help="tasks run side by side, each in its own process")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    tasks = online_tasks(args.algos)
    print(f"defaults hold: {len(tasks)} online canonical tasks to {args.factor:g}x budget; {C.machine_line()}")
    rows = []
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, name, task, args.factor) for name, task in tasks]
        for future in futures:
            r = future.result()
            task, run = r["task"], r["run"]
            bar = task.threshold if task.hold_threshold is None else task.hold_threshold
            print(f"{r['name']} on {task.env}: curve {[(s, round(m, 1)) for s, m in run.curve]}")
            C.flush()
            reached = run.reached >= task.threshold
            verdict = "not reached" if not reached else ("holds" if run.held >= bar else "falls back")
            rows.append([r["name"], task.env, f"{task.threshold:g} by {task.budget:,}",
                         f"{run.steps:,}" if reached else f"not by {run.steps:,}",
                         f"{r['hold']:,}", C.fmt_num(run.held) if reached else "-", C.fmt_num(r["worst"]),
                         f"{bar:g}", verdict, f"{r['wall_s']:.0f}"])
    C.print_table(["algorithm", "task", "threshold by budget", "reached at", "held to", "last window",
                   "worst window after", "hold bar", "verdict", "wall s"], rows,
                  title=f"defaults on their canonical tasks, held to {args.factor:g}x the budget (seed: the task's)")


if __name__ == "__main__":
    main()
