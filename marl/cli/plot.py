"""`marl plot RUN_DIR...`: learning curves of run directories."""

from __future__ import annotations

import sys

from marl import path_checks
from marl.logging.plots import plot_runs


def cmd_plot(args) -> int:
    for run_dir in args.run_dirs:
        path_checks.input_dir(run_dir, "RUN_DIR", what="run directory")
    output = args.output or (args.run_dirs[0] if len(args.run_dirs) == 1 else "plots")
    path_checks.output_dir(output, "--output" if args.output else "plots folder")
    try:
        paths = plot_runs(args.run_dirs, output)
    except ValueError as err:  # a run directory without results yet
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
