"""`marl graph`: the workflow graph a config runs, as text and a picture."""

from __future__ import annotations

from pathlib import Path

from marl import path_checks
from marl.cli.scenario_args import config_from_args, import_modules_of
from marl.runtime.algorithm import workflow_for
from marl.workflow.draw import draw_workflow


def cmd_graph(args) -> int:
    if args.output and not args.no_png:
        path_checks.output_file(args.output, "--output")
    import_modules_of(args)
    config, name = config_from_args(args)
    wf = workflow_for(config)  # the graph a run of this config runs, its evaluate node included
    print(wf.describe())
    if not args.no_png:
        png = Path(args.output or f"{name}_workflow.png")
        png.parent.mkdir(parents=True, exist_ok=True)
        print(f"picture: {draw_workflow(wf, png, title=f'{name}: workflow {wf.name!r}')}")
    return 0
