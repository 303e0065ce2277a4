"""`marl graph`: the workflow graph a config runs, as text and a picture; with --psro, the PSRO loop around it."""

from __future__ import annotations

import inspect
from pathlib import Path

import yaml

from marl import path_checks
from marl.cli.scenario_args import config_from_args, import_modules_of
from marl.config.sections import ConfigError
from marl.population.loop_graph import describe_loop, draw_loop, psro_loop
from marl.population.psro import PSRO
from marl.runtime.algorithm import workflow_for
from marl.workflow.draw import draw_workflow

PSRO_SETTINGS = [name for name in inspect.signature(PSRO).parameters if name != "config"]


def psro_settings(args) -> dict:
    """The `psro.<setting>=value` items of the command line (PSRO's keyword arguments), taken out of the overrides."""
    settings = {}
    for field in ("overrides", "extra_positionals"):
        items = list(getattr(args, field, []) or [])
        for item in items:
            if item.startswith("psro.") and "=" in item:
                key, value = item[len("psro."):].split("=", 1)
                if key not in PSRO_SETTINGS:
                    raise ConfigError(f"psro.{key} is not a PSRO setting; allowed: {PSRO_SETTINGS}")
                settings[key] = yaml.safe_load(value)
        setattr(args, field, [item for item in items if not item.startswith("psro.")])
    return settings


def cmd_graph(args) -> int:
    if args.output and not args.no_png:
        path_checks.output_file(args.output, "--output")
    import_modules_of(args)
    settings = psro_settings(args) if args.psro else {}
    config, name = config_from_args(args)
    wf = workflow_for(config)  # the graph a run of this config runs, its evaluate node included
    if args.psro:
        loop = psro_loop(PSRO(config, **settings), wf)  # PSRO checks its settings against the config, in one line each
        print(describe_loop(loop))
    print(wf.describe())
    if not args.no_png:
        png = Path(args.output or f"{name}_{'psro' if args.psro else 'workflow'}.png")
        png.parent.mkdir(parents=True, exist_ok=True)
        if args.psro:
            print(f"picture: {draw_loop(loop, png, title=f'{name}: PSRO loop, best responses by workflow {wf.name!r}')}")
        else:
            print(f"picture: {draw_workflow(wf, png, title=f'{name}: workflow {wf.name!r}')}")
    return 0
