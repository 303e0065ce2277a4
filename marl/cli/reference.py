"""`marl defaults ALGO` and `marl reference [ALGO...]`: every key of a scenario with its default and meaning."""

from __future__ import annotations

from marl.algorithms.reference import defaults_yaml, scenario_reference
from marl.cli.scenario_args import algorithm_names


def cmd_defaults(args) -> int:
    print(defaults_yaml(args.algo), end="")
    return 0


def cmd_reference(args) -> int:
    print(scenario_reference(args.algos or algorithm_names()), end="")
    return 0
