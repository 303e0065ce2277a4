"""MAT against MAPPO (issue 45) on MPE simple_spread and SMAX 2s3z, 3 seeds a side: final returns, IQM at equal env steps, wall time.

    nice -n 5 .venv/bin/python -m benchmarks --save mat_vs_mappo --runs runs/mat_vs_mappo --out docs/results/mat_vs_mappo
    .venv/bin/python benchmarks/studies/mat_vs_mappo.py --report-only     # the tables and the report again from the kept runs

The cells are two `marl experiment` suites (suites/mat_vs_mappo_spread.yaml, suites/mat_vs_mappo_smax.yaml: the
settings, and where each comes from, are in their header), run with `--local` (one process, one run at a time) under
one thread each (OMP_NUM_THREADS=1, JAX's CPU client on one thread, learners.num_threads 1). Seeds go in rounds:
seed 0 of both algorithms, then seed 1, then seed 2, so a run cut short leaves the sides with equal seeds;
re-running skips finished runs and resumes an interrupted one from its checkpoint (`marl experiment`'s own rule).
Then `marl report` over both runs directories writes the report (IQM and mean with rliable's 95 % stratified-
bootstrap CIs, marl_eval.json, the curves) to --out, and this script prints, and appends to its results.md:
per run the final greedy evaluation's mean return (32 episodes), the last training return, the training time
(the sum of the iterations' times, evaluation included: `time_total_s`) and env steps/s over it; per task and
algorithm the IQM of the greedy evaluation returns at 25/50/75/100 % of the task's budget (each run's
evaluations linearly interpolated to the point, as `marl report`'s curves are) with rliable's 95 % CIs.
A `notes.md` beside the report (hand-written: what the numbers say) is appended to results.md after the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
from _records import table_markdown

ROOT = C.REPO_ROOT
PARTS = {"spread": "suites/mat_vs_mappo_spread.yaml", "smax": "suites/mat_vs_mappo_smax.yaml"}
POINTS = (0.25, 0.5, 0.75, 1.0)
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}


def train(part: str, runs: Path, seeds: int, nice: int) -> int:
    """`marl experiment` of one suite, seed round by seed round, in a child process each (one at a time)."""
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for k in range(1, seeds + 1):
        cmd = [sys.executable, "-c", "import sys; from marl.cli import main; sys.exit(main())", "experiment",
               PARTS[part], "--local", "--output", str(runs / part), f"seeds=[{','.join(map(str, range(k)))}]"]
        print(f"[{part}] seeds 0..{k - 1}: {' '.join(cmd[3:])}", flush=True)
        code = subprocess.call(cmd, cwd=ROOT, env=env, preexec_fn=(lambda: os.nice(nice)) if nice else None)
        if code != 0:
            return code
    return 0


def run_facts(run_dir: Path) -> dict:
    """Training time, env steps and the last training return of one run directory (its result.jsonl)."""
    rows = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines() if line.strip()]
    last = rows[-1]
    train_returns = [r.get("episode_return_mean") for r in rows if r.get("episode_return_mean") is not None]
    return {"time_s": float(last["time_total_s"]), "env_steps": int(last["env_steps_total"]),
            "train_return": float(train_returns[-1]) if train_returns else float("nan")}


def fmt(x: float) -> str:
    return "-" if x != x else f"{x:.2f}"


def tables(sources: list[Path], reps: int) -> list[tuple[str, list[str], list[list[str]]]]:
    from rliable import metrics

    from marl.experiment.report_curves import run_curve
    from marl.experiment.report_runs import read_runs, suite_of

    per_run, iqm_rows, speed_rows = [], [], []
    for source in sources:
        runs, _ = read_runs(source)
        budget = int(suite_of(source)["env_steps"])
        grid = np.array([p * budget for p in POINTS])
        for task in dict.fromkeys(r.task for r in runs):
            for algo in dict.fromkeys(r.algorithm for r in runs if r.task == task):
                ours = sorted((r for r in runs if r.task == task and r.algorithm == algo), key=lambda r: r.seed)
                facts = [run_facts(source / task / algo / f"seed_{r.seed}") for r in ours]
                for r, f in zip(ours, facts):
                    per_run.append([task, algo, str(r.seed), fmt(r.final), fmt(f["train_return"]), f"{f['env_steps']:,}",
                                    f"{f['time_s']:.0f}", f"{f['env_steps'] / f['time_s']:.0f}"])
                curves = np.array([run_curve(grid, r.steps, r.returns) for r in ours])  # seeds x points
                iqm_rows.append([task, algo, str(len(ours)), *C.estimate_cells(curves, metrics.aggregate_iqm, reps, fmt)])
                times = [f["time_s"] for f in facts]
                speed_rows.append([task, algo, f"{C.median(times):.0f}", f"{min(times):.0f}-{max(times):.0f}",
                                   f"{C.median([f['env_steps'] / f['time_s'] for f in facts]):.0f}"])
    points = [f"{int(p * 100)} % of budget" for p in POINTS]
    return [
        ("Per run: final greedy evaluation (32 episodes, mean return), last training return, training time",
         ["task", "algorithm", "seed", "final eval return", "last train return", "env steps", "time s", "env steps/s"],
         per_run),
        ("IQM of the greedy evaluation return at equal env steps, 95 % CI (rliable, stratified bootstrap over seeds)",
         ["task", "algorithm", "runs", *points], iqm_rows),
        ("Training time per run (sum of iteration times, evaluation included)",
         ["task", "algorithm", "median s", "range s", "median env steps/s"], speed_rows),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="runs/mat_vs_mappo", help="runs directory (one folder per suite under it)")
    parser.add_argument("--out", default="docs/results/mat_vs_mappo", help="where `marl report` writes")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--nice", type=int, default=5, help="niceness of the training processes")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap repetitions")
    parser.add_argument("--report-only", action="store_true", help="no training: tables and report from the kept runs")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    runs = (ROOT / args.runs).resolve()
    if not args.report_only:
        for part in args.parts:
            code = train(part, runs, args.seeds, args.nice)
            if code != 0:
                print(f"mat_vs_mappo: marl experiment ({part}) exited with {code}", file=sys.stderr)
                return code
    sources = [runs / part for part in args.parts if (runs / part / "suite.yaml").is_file()]
    if not sources:
        print(f"mat_vs_mappo: no runs under {runs} (train first)", file=sys.stderr)
        return 1
    from marl.experiment.report import write_report
    from marl.experiment.report_runs import suite_of

    out = (ROOT / args.out).resolve()
    write_report(sources, out, reps=args.reps)
    blocks = tables(sources, args.reps)
    for title, headers, rows in blocks:
        C.print_table(headers, rows, title)
    text = (out / "results.md").read_text().rstrip("\n")
    suites = [suite_of(source) for source in sources]
    if len(suites) > 1:  # the report's title and budget are the first runs directory's: name every suite's
        first = suites[0]
        text = text.replace(f"Suite `{first['name']}`", "Suites " + " + ".join(f"`{s['name']}`" for s in suites), 1)
        budgets = ", ".join(f"{s['env_steps']} ({s['name']})" for s in suites)
        text = text.replace(f"{first['env_steps']} env steps per run", f"env steps per run: {budgets}", 1)
        text = text.replace("## Overall (scores min-max normalised per task)",
                            "## Overall (scores min-max normalised per task; the tasks' budgets differ, see above)", 1)
    text += "\n\n## Per run and at equal env steps\n\n"
    text += "\n\n".join(table_markdown({"title": t, "headers": h, "rows": r}) for t, h, r in blocks) + "\n"
    notes = out / "notes.md"
    if notes.is_file():
        text += "\n" + notes.read_text()
    (out / "results.md").write_text(text)
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
