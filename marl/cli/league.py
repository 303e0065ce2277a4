"""`marl league DIR`: a saved population's ratings table, payoff heat map and rating curves."""

from __future__ import annotations

import sys

from marl import path_checks
from marl.population.report import write_league_report


def cmd_league(args) -> int:
    path_checks.input_dir(args.run_dir, "DIR", what="population folder")
    if args.output:
        path_checks.output_dir(args.output, "--output")
    try:
        paths = write_league_report(args.run_dir, args.output)
    except ValueError as err:  # no population.json there
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0
