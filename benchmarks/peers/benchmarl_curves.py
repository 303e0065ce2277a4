"""marl and BenchMARL learning curves side by side on VMAS balance and navigation: same seeds, matched settings, IQM tables, one plot.

    bash benchmarks/peers/setup_benchmarl.sh                   # once: BenchMARL in its own venv (/work/venvs/benchmarl)
    nice .venv/bin/python -m benchmarks --save benchmarl_curves --env-steps 1000000 --worlds 64 --seeds 0 1 2 \
        --json runs/benchmarl-curves.json --plot docs/results/benchmarl_vmas/curves.png

compare_benchmarl.py's runs at a learning budget: the same task scripts (marl_tasks.py in marl's venv,
benchmarl_tasks.py in BenchMARL's), the same matched settings (its docstring lists them: one VMAS env of
W worlds on both sides, one 100-step episode per world per iteration, 4 epochs of 800 x W / 32-row
minibatches, lr 5e-4, [128, 128] tanh, shared parameters; one torch thread each), the same sides (`marl`:
in-process, the batched path; `BenchMARL`: its SerialEnv over TorchRL's VmasEnv), the same seeds, back to
back per task and seed with the order rotating with the seed. Both sides emit every iteration's return
(the mean over the episodes that ended in it, summed over agents) at the same env steps (W x 100 per
iteration), which this script keeps whole. Printed: the return at 25/50/75/100 % of the budget (each the
mean of a run's per-iteration returns over the 10 % of the budget before that point), IQM over seeds with
rliable's 95 % stratified-bootstrap CIs (marl.experiment.report.interval_estimates); per run its wall time
(process start to exit), env steps/s including learning (build to last result) and start-up; with --plot,
one PNG: every task and algorithm a panel, both libraries' mean curves over seeds with rliable's 95 % CI
band. `--config fine-tuned` runs BenchMARL's fine-tuned VMAS experiment on both sides instead of the matched settings:
marl's side composed `algorithm=mappo|ippo task=vmas/balance|navigation experiment=benchmarl_vmas` (marl_tasks.py
--config fine-tuned), BenchMARL's its own algorithm, model and task yamls under the fine-tuned experiment's keys
(benchmarl_tasks.py --config fine-tuned), both at --worlds worlds (the experiment's own: 600) and the budget; the
runs' labels end in ", fine-tuned". --merge adds the runs of earlier --json files (e.g. invocations that ran other seeds beside this one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
from compare_benchmarl import ALGOS, DEFAULT_BENCHMARL_PY, SIDES, comma_list
from compare_rllib import MARL_PY, Run, fmt, fmt_mb, run_process

HERE = Path(__file__).resolve().parent
CURVE_SIDES = ("marl", "BenchMARL")
POINTS = (0.25, 0.5, 0.75, 1.0)  # fractions of the budget the table reads the returns at
WINDOW = 0.1  # a point's return: the mean of the per-iteration returns over this fraction of the budget before it
VMAS_ALGOS = [a for a in ALGOS if ALGOS[a][2] != "spread"]


def return_at(run: Run, point: float, budget: int) -> float:
    """The mean of the run's per-iteration returns over (point - WINDOW, point] x budget (NaN: no iteration there)."""
    hi, lo = point * budget, (point - WINDOW) * budget
    values = [e["return"] for e in run.iters if lo < e["env_steps"] <= hi and e["return"] == e["return"]]
    return float(np.mean(values)) if values else float("nan")


def wall_s(run: Run) -> float:
    return run.t_end - run.t_spawn


def iqm_table(runs: list[Run], budget: int, reps: int) -> list[list[str]]:
    from rliable import metrics

    rows = []
    for label in dict.fromkeys(r.task for r in runs):
        for side in CURVE_SIDES:
            ours = sorted((r for r in runs if r.task == label and r.side == side and not r.failed), key=lambda r: r.seed)
            if not ours:
                continue
            scores = np.array([[return_at(r, p, budget) for p in POINTS] for r in ours])
            # '-' at a point some seed has no return at (no episode ended in its window)
            cells = C.estimate_cells(scores, metrics.aggregate_iqm, reps, fmt)
            rows.append([label, side, ", ".join(str(r.seed) for r in ours), *cells])
    return rows


def speed_table(runs: list[Run]) -> list[list[str]]:
    rows = []
    for label in dict.fromkeys(r.task for r in runs):
        by_side = {s: [r for r in runs if r.task == label and r.side == s and not r.failed] for s in CURVE_SIDES}
        if not all(by_side.values()):
            continue
        rate = {s: C.median([r.steps_per_s() for r in rs]) for s, rs in by_side.items()}
        wall = {s: C.median([wall_s(r) for r in rs]) for s, rs in by_side.items()}
        rows.append([label, fmt(rate["marl"]), fmt(rate["BenchMARL"]), fmt(rate["marl"] / rate["BenchMARL"], "x"),
                     fmt(wall["marl"], " s"), fmt(wall["BenchMARL"], " s"), fmt(wall["BenchMARL"] / wall["marl"], "x")])
    return rows


def plot(runs: list[Run], budget: int, path: Path, reps: int) -> None:
    """One panel per task label: each side's mean over seeds of the per-iteration returns, with a 95 % CI band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import metrics

    from marl.experiment.report import interval_estimates
    from marl.experiment.report_curves import curve_lines, draw, run_curve

    labels = list(dict.fromkeys(r.task for r in runs))
    fig, axes = plt.subplots(1, len(labels), figsize=(5.5 * len(labels), 4.2), dpi=100, squeeze=False)
    colours = {"marl": "tab:blue", "BenchMARL": "tab:orange"}
    for ax, label in zip(axes.flat, labels):
        curves, ends = {}, {}
        steps = sorted({e["env_steps"] for r in runs if r.task == label for e in r.iters})
        grid = np.array([s for s in steps if s <= budget], dtype=float)
        for side in CURVE_SIDES:
            ours = [r for r in runs if r.task == label and r.side == side and not r.failed]
            if not ours:
                continue
            rows = []
            for r in ours:
                it = [e for e in r.iters if e["return"] == e["return"]]
                rows.append(run_curve(grid, np.array([e["env_steps"] for e in it], dtype=float),
                                      np.array([e["return"] for e in it])))
            curves[side] = np.array(rows)[:, None, :]
            ends[side] = [float(r.env_steps()) for r in ours]
        lines = curve_lines(grid, curves, ends,
                            lambda s: interval_estimates(s, C.per_point(metrics.aggregate_mean), reps))
        draw(ax, lines, colours, "env steps", "return (summed over agents), mean over seeds")
        seeds = sorted({r.seed for r in runs if r.task == label})
        ax.set_title(f"{label} (seeds {', '.join(map(str, seeds))})")
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("marl vs BenchMARL, matched settings: mean over seeds, 95 % CI (rliable bootstrap)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def run_all(args, cases, bm_py: Path, log_dir: Path) -> list[Run]:
    """Every (seed, task)'s two sides, seed-major, the order of the sides rotating with the seed; with --jobs 2 two
    runs at a time (mostly a seed's two sides together, so both meet the same load)."""
    from concurrent.futures import ThreadPoolExecutor

    todo = []
    for seed in args.seeds:  # seed-major: an interrupted invocation still has whole seeds of every task
        for label, algo, worlds in cases:
            marl_task, bm_task, env = ALGOS[algo]
            extra = ["--max-env-steps", str(args.env_steps), "--worlds", str(worlds), "--config", args.config]
            sides = [(label, seed, side, bm_py if side == "BenchMARL" else MARL_PY,
                      "benchmarl_tasks.py" if side == "BenchMARL" else "marl_tasks.py",
                      bm_task if side == "BenchMARL" else marl_task, [*SIDES[side](env, worlds), *extra])
                     for side in CURVE_SIDES]
            todo += sides[seed % 2:] + sides[: seed % 2]  # rotate the order with the seed

    def one(label, seed, side, python, script, task, side_args) -> Run:
        run = run_process(side, python, script, label.replace(", ", "_").replace(" ", "_"), task, seed, side_args,
                          log_dir, False)
        run.task = label
        print(f"  {label} seed {seed}: {side}: " + ("FAILED, see " + run.log if run.failed else
              f"{run.env_steps():,} env steps in {wall_s(run):.0f} s, {run.steps_per_s():,.0f}/s, "
              f"return at the end {fmt(return_at(run, 1.0, args.env_steps))}, load {run.load:.1f}"), flush=True)
        return run

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(lambda item: one(*item), todo))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algos", default="MAPPO", help="comma-separated, of: MAPPO, IPPO")
    ap.add_argument("--tasks", default="balance,navigation", help="comma-separated, of: balance, navigation")
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2], help="the seeds to run (none: only --merge)")
    ap.add_argument("--worlds", type=int, default=64, help="VMAS worlds on both sides (W x 100 env steps per iteration)")
    ap.add_argument("--env-steps", type=int, default=1_000_000, help="env-step budget of every run")
    ap.add_argument("--config", choices=["matched", "fine-tuned"], default="matched",
                    help="fine-tuned: BenchMARL's fine-tuned VMAS experiment on both sides (marl: the preset "
                         "composition experiment=benchmarl_vmas; 600 worlds is its own count); matched: the settings above")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (2: a seed's two sides side by side)")
    ap.add_argument("--benchmarl-python", default=str(DEFAULT_BENCHMARL_PY))
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--json", default=None, help="write every run's events here")
    ap.add_argument("--merge", action="append", default=[], metavar="JSON", help="add an earlier --json file's runs")
    ap.add_argument("--plot", default=None, help="write the curves' PNG here")
    ap.add_argument("--bootstrap-reps", type=int, default=2000, help="rliable's bootstrap resamples per estimate")
    args = ap.parse_args()
    algos = comma_list(args.algos, ["MAPPO", "IPPO"], "--algos")
    envs = comma_list(args.tasks, ["balance", "navigation"], "--tasks")
    if args.worlds < 1 or args.env_steps < args.worlds * 100:
        sys.exit(f"--worlds {args.worlds} / --env-steps {args.env_steps}: need worlds >= 1 and a budget of at least "
                 f"one iteration (worlds x 100 env steps)")
    bm_py = Path(args.benchmarl_python)
    if args.seeds and not bm_py.exists():
        sys.exit(f"BenchMARL's python '{bm_py}' does not exist: run `bash benchmarks/peers/setup_benchmarl.sh` first")
    suffix = ", fine-tuned" if args.config == "fine-tuned" else ""
    cases = [(f"{a} {e}, {args.worlds} worlds{suffix}", f"{a} {e}", args.worlds) for e in envs for a in algos]
    log_dir = Path(args.log_dir) if args.log_dir else None
    if log_dir is None:
        import tempfile

        log_dir = Path(tempfile.mkdtemp(prefix="benchmarl_curves-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = "1"
    # marl's runs import the marl of this checkout, not whichever one the venv has installed
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])])
    print(f"benchmarl_curves: {C.machine_line()}; budget {args.env_steps:,} env steps at {args.worlds} worlds; "
          f"logs in {log_dir}", flush=True)
    merged = [Run(**r) for path in args.merge for r in json.loads(Path(path).read_text())["runs"]]
    t_all = time.time()
    runs = merged + run_all(args, cases, bm_py, log_dir)
    wanted = {c[0] for c in cases}
    runs = [r for r in runs if r.task in wanted]
    if not runs:
        sys.exit("no runs: give --seeds or --merge a --json file of these tasks")
    if args.json:
        data = [{**{k: getattr(r, k) for k in ("side", "task", "seed", "t_spawn", "t_end", "rc", "peak_pss", "peak_rss",
                                                  "peak_procs", "log", "load")}, "events": r.events} for r in runs]
        C.write_json(args.json, {"args": vars(args), "runs": data})
    C.print_table(["run", "side", "seed", "load at start", "env steps", "wall (process start to exit)",
                   "first result", "env steps/s incl. learning", "peak PSS", *(f"return at {p:.0%}" for p in POINTS)],
                  [[r.task, r.side, r.seed, f"{r.load:.1f}", f"{r.env_steps():,}", fmt(wall_s(r), " s"),
                    fmt(r.startup_s(), " s"), fmt(r.steps_per_s()), fmt_mb(r.peak_pss),
                    *(fmt(return_at(r, p, args.env_steps)) for p in POINTS)] if not r.failed else
                   [r.task, r.side, r.seed, f"{r.load:.1f}", "failed", "", "", "", "", *([""] * len(POINTS))]
                   for r in runs], title="Runs")
    C.print_table(["task", "side", "seeds", *(f"{p:.0%} of {args.env_steps:,}" for p in POINTS)],
                  iqm_table(runs, args.env_steps, args.bootstrap_reps),
                  title=f"Return (summed over agents; mean over the {WINDOW:.0%} of the budget before each point): "
                        f"IQM over seeds [rliable 95 % CI]")
    C.print_table(["task", "marl env steps/s", "BenchMARL env steps/s", "marl / BenchMARL", "marl wall",
                   "BenchMARL wall", "BenchMARL / marl"], speed_table(runs),
                  title="Speed (medians over seeds; env steps/s from the build to the last result, incl. learning; "
                        "wall: process start to exit)")
    if args.plot:
        plot(runs, args.env_steps, Path(args.plot), args.bootstrap_reps)
        print(f"plot: {args.plot}")
    print(f"\ntotal {time.time() - t_all:.0f} s; load avg now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
