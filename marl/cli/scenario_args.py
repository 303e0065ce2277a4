"""The arguments that name a config, shared by `marl train` and `marl graph`: a scenario file and/or config groups
with key=value overrides, or --algo/--env, and --import."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from marl import path_checks
from marl.config.compose import Composition, compose, split_items
from marl.config.registry import discovered
from marl.errors import ConfigError
from marl.execution.user_code import add_import_option, import_user_modules


def algorithm_names() -> list[str]:
    return list(discovered())


def split_positionals(args) -> tuple[str | None, list[str]]:
    """The scenario file and the key=value overrides, in whatever order they came (options between them
    too): an item with '=' that is not a file is an override, the one other item is the scenario."""
    items = ([args.scenario] if args.scenario is not None else []) + list(args.overrides) + list(args.extra_positionals)
    overrides = [item for item in items if "=" in item and not Path(item).is_file()]
    scenarios = [item for item in items if item not in overrides]
    if len(scenarios) > 1:
        raise ConfigError(
            f"one scenario file at most, got {scenarios}; overrides look like key=value (training.lr=1e-4)"
        )
    return (scenarios[0] if scenarios else None), overrides


def import_modules_of(args) -> list[str]:
    """`--import MODULE`: modules that register envs (marl.register_env) or define classes a scenario names."""
    return import_user_modules(getattr(args, "imports", []) or [])


def composition_from_args(args) -> Composition:
    """The composition (`marl.config.compose`) of a scenario file, config groups (algorithm=, task=, experiment=),
    --algo/--env and key=value overrides."""

    scenario, items = split_positionals(args)
    env = getattr(args, "env", None)
    selections, _ = split_items(items)
    if args.algo and "algorithm" in selections:
        raise ConfigError("give either --algo or algorithm=NAME, not both")
    if scenario is not None:
        if args.algo:
            raise ConfigError("give either a scenario file or --algo, not both (the scenario names its algo)")
        path_checks.input_file(scenario, "scenario")
    elif not args.algo and "algorithm" not in selections:
        raise ConfigError("give a scenario file (marl train scenarios/cartpole_ppo.yaml), algorithm=NAME task=FAMILY/TASK "
                          "(marl configs) or --algo NAME --env ENV")
    # --algo and --env are command-line keys like any other, given first so that a key=value after them wins
    shorthands = ([f"algo={args.algo}"] if args.algo else []) + ([f"environment.env={env}"] if env else [])
    name = None if scenario is not None or selections else re.sub(r"[^\w.-]+", "_", f"{args.algo}-{env}" if env else args.algo)
    return compose(scenario, shorthands + items, name=name)


def config_from_args(args):
    """(config, name for the run directory) from a scenario file, config groups or --algo/--env."""
    composition = composition_from_args(args)
    return composition.config(), composition.name


def add_source_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("scenario", nargs="?", help="scenario YAML file (or config groups, or --algo/--env)")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value",
        help="config groups (algorithm=mappo task=vmas/balance experiment=NAME: `marl configs`) and overrides on top, "
             "e.g. training.lr=1e-4 stop.iterations=5 (every key: docs/scenario_reference.md)",
    )
    parser.add_argument(
        "--algo", choices=algorithm_names(), type=str.upper,
        help=f"{what} this algorithm with its defaults instead of a scenario file (one of: {', '.join(algorithm_names())})",
    )
    parser.add_argument("--env", help="environment.env: a Gymnasium id (module:Id imports its module first), "
                        "PettingZoo module path, vmas.<scenario> or registered name (see `marl envs`)")
    add_import_option(parser)
