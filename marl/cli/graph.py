"""`marl graph`: the workflow graph a config runs, as text and a picture; with --psro (or a scenario with a
`psro:` section), the PSRO loop around it."""

from __future__ import annotations

from pathlib import Path

from marl import path_checks
from marl.cli.scenario_args import config_from_args, import_modules_of
from marl.population.loop_graph import describe_loop, draw_loop, psro_loop
from marl.population.psro import PSRO
from marl.runtime.algorithm import workflow_for
from marl.workflow.draw import draw_workflow


def cmd_graph(args) -> int:
    if args.output and not args.no_png:
        path_checks.output_file(args.output, "--output")
    import_modules_of(args)
    config, name = config_from_args(args)  # psro.KEY=VALUE overrides land in its psro section, checked key by key
    wf = workflow_for(config)  # the graph a run of this config runs, its evaluate node included
    psro = args.psro or config.psro_cfg is not None  # a scenario with a psro section is a PSRO run: draw its loop
    if psro:
        loop = psro_loop(PSRO.from_config(config), wf)  # PSRO checks its settings against the config, in one line each
        print(describe_loop(loop))
    print(wf.describe())
    if not args.no_png:
        png = Path(args.output or f"{name}_{'psro' if psro else 'workflow'}.png")
        png.parent.mkdir(parents=True, exist_ok=True)
        if psro:
            print(f"picture: {draw_loop(loop, png, title=f'{name}: PSRO loop, best responses by workflow {wf.name!r}')}")
        else:
            print(f"picture: {draw_workflow(wf, png, title=f'{name}: workflow {wf.name!r}')}")
    return 0
