"""The `marl experiment` and `marl report` commands (registered in marl/cli/main.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from marl import path_checks
from marl.execution.user_code import add_import_option, import_user_modules
from marl.errors import ConfigError
from marl.experiment.report_runs import SCORES
from marl.experiment.runner import _save_suite, pending_runs, run_in_use, run_local, run_tune
from marl.experiment.suite import load_suite
from marl.logging.live import ProgressDisplay
from marl.logging.run_dir import runs_root
from marl.experiment.report import write_report


def cmd_experiment(args) -> int:
    if args.address:
        os.environ["RAY_ADDRESS"] = args.address
    overrides = list(args.overrides) + list(getattr(args, "extra_positionals", []))
    bad = [item for item in overrides if "=" not in item]
    if bad:
        raise ConfigError(f"one suite file, then key=value overrides of its keys (env_steps=5000); got {bad}")
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise ConfigError(f"--max-concurrent must be >= 1, got {args.max_concurrent}")
    path_checks.input_file(args.suite, "suite")
    if args.output:
        path_checks.output_dir(args.output, "--output", what="runs directory")
    imported = import_user_modules(args.imports)
    suite = load_suite(args.suite, overrides, extra_imports=imported)
    runs_dir = Path(args.output) if args.output else runs_root() / suite.name
    _save_suite(suite, runs_dir)
    todo, done = pending_runs(suite, runs_dir)
    with open(os.devnull, "w") as devnull, ProgressDisplay(
        live=False if args.quiet else None, prefix_names=True, stream=devnull if args.quiet else None
    ) as display:
        shape = (f"{len(suite.targets)} target rows x {len(suite.seeds)} seeds), each to its target or budget" if suite.targets else
                 f"{len(suite.tasks)} tasks x {len(suite.algorithms)} algorithms x {len(suite.seeds)} seeds), {suite.env_steps} env steps each")
        display.message(
            f"suite {suite.name}: {len(suite.runs)} runs ({shape}; {len(done)} finished, {len(todo)} to run "
            f"({'in-process' if args.local else 'Ray Tune trials'}); runs directory: {runs_dir.resolve()}"
        )
        try:
            failed = run_local(suite, runs_dir, display) if args.local else run_tune(suite, runs_dir, display, args.max_concurrent)
        except KeyboardInterrupt:
            display.message(f"interrupted: re-run the same command to resume ({runs_dir})")
            return 130
        todo, done = pending_runs(suite, runs_dir)
        busy = [spec.name for spec in todo if run_in_use(runs_dir / spec.relative_dir)]
        if busy:
            display.message(f"{len(busy)} run(s) left to the process training them: {', '.join(busy)}")
            todo = [spec for spec in todo if spec.name not in busy]
        if failed:
            display.message(f"{len(failed)} run(s) failed: {', '.join(failed)}; re-run to retry them")
            return 1
        if todo:  # Tune stopped early (Ctrl-C): its trials end without an error
            display.message(f"interrupted: {len(todo)} run(s) unfinished; re-run the same command to resume ({runs_dir})")
            return 130
        finished = f"{len(done)} of {len(suite.runs)} runs finished" if busy else f"all {len(done)} runs finished"
        display.message(f"{finished}; report: marl report {runs_dir}")
    return 0


def cmd_report(args) -> int:
    for source in args.sources:
        if not Path(source).is_dir():
            path_checks.input_file(source, "SOURCE")  # a marl-eval JSON file, or a missing path: one line
    if args.output:
        path_checks.output_dir(args.output, "--output")
    paths = write_report(args.sources, args.output, reps=args.reps, points=args.points, score=args.score)
    for path in paths:
        print(path)
    return 0


def add_parsers(sub) -> None:
    """Adds `experiment` and `report` to the `marl` command's subparsers."""
    experiment = sub.add_parser(
        "experiment", help="run a benchmark suite (tasks x algorithms x seeds)",
        description="Run every (task, algorithm, seed) of a suite file to its env-step budget, as Ray Tune trials "
                    "(or one after the other in this process with --local). Resumable: re-running skips finished "
                    "runs and resumes interrupted ones from their checkpoints.",
        epilog="examples:\n  marl experiment suites/smoke.yaml --output runs/smoke\n"
               "  marl experiment suites/mpe_cooperative.yaml env_steps=50000 --max-concurrent 2\n"
               "  ray job submit --address http://HEAD:8265 --working-dir . -- marl experiment suites/mpe_cooperative.yaml "
               "--output /shared/runs/mpe",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    experiment.add_argument("suite", help="suite YAML file (suites/smoke.yaml)")
    experiment.add_argument("overrides", nargs="*", metavar="key=value", help="overrides of the suite's keys, e.g. env_steps=5000 seeds=3")
    experiment.add_argument("--output", metavar="RUNS_DIR", help="runs directory (default: $MARL_RUNS_DIR or ./runs, then the suite's name)")
    experiment.add_argument("--local", action="store_true", help="run in this process, one run after the other (no Ray Tune)")
    experiment.add_argument("--max-concurrent", type=int, metavar="N", help="at most N trials at once (default: as many as the CPUs allow)")
    experiment.add_argument("--address", metavar="ADDRESS", help="join this Ray cluster (as RAY_ADDRESS does)")
    experiment.add_argument("--quiet", action="store_true", help="print nothing")
    add_import_option(experiment)
    experiment.set_defaults(fn=cmd_experiment)

    report = sub.add_parser(
        "report", help="aggregate a suite's runs: IQM/mean with bootstrap CIs, curves, profiles",
        description="Aggregate the runs of `marl experiment` with rliable: per task and overall IQM and mean with 95 % "
                    "stratified-bootstrap confidence intervals, sample-efficiency curves, performance profiles (PNGs), "
                    "a Markdown table and a marl-eval JSON file. Runs from several sources are merged: runs directories "
                    "and marl-eval JSON files (a committed report's marl_eval.json, BenchMARL's JSON output).",
    )
    report.add_argument("sources", nargs="+", metavar="SOURCE",
                        help="a runs directory of `marl experiment`, or a marl-eval JSON file; a run may come from one source only")
    report.add_argument("--output", "-o", metavar="DIR",
                        help="where to write the report (default: the first runs directory's report/; needed with JSON files alone)")
    report.add_argument("--reps", type=int, default=2000, help="bootstrap replications (default 2000)")
    report.add_argument("--points", type=int, default=10, help="points of the sample-efficiency curves (default 10)")
    report.add_argument("--score", choices=SCORES, default="evaluation",
                        help="a runs directory's curve and score: the greedy evaluations (default), or the exploring "
                             "policy's training returns (the score: their mean over the last 10 %% of each run)")
    report.set_defaults(fn=cmd_report)

