"""`marl train`: a run directory from a scenario (or --algo/--env), or `--resume RUN_DIR`."""

from __future__ import annotations

import os
from pathlib import Path

from marl import path_checks
from marl.cli.scenario_args import composition_from_args, import_modules_of, split_positionals
from marl.config.compose import split_items
from marl.errors import ConfigError
from marl.logging import make_run_dir
from marl.logging.live import ProgressDisplay
from marl.logging.run_dir import CONFIG_FILE
from marl.population.psro_run import psro_run
from marl.runtime.run_loop import config_for_resume, train_run


def cmd_train(args) -> int:
    if args.address:
        os.environ["RAY_ADDRESS"] = args.address  # Algorithm joins it instead of starting a local Ray
    if args.resume:  # paths first: a refused one stops the command before anything is built
        path_checks.input_dir(args.resume, "--resume", holds=CONFIG_FILE, what="run directory")
        if args.output:
            path_checks.not_inside(Path(args.output), "--output", args.output, (("--resume", args.resume),))
    if args.output:
        path_checks.output_dir(args.output, "--output", what="run directory")
    imported = import_modules_of(args)
    if args.resume:
        scenario, overrides = split_positionals(args)
        if scenario is not None or args.algo or args.env or split_items(overrides)[0] or args.cfg:
            raise ConfigError("--resume takes its config from RUN_DIR/config.yaml; give only key=value overrides with it")
        config = config_for_resume(args.resume, overrides)  # imports the modules its config.yaml records
        run_dir, fresh_config = Path(args.resume), False
    else:
        composition = composition_from_args(args)
        if args.cfg:  # the composed config with each key's origin; nothing is built or written
            print(composition.annotated(), end="")
            return 0
        config, name = composition.config(validate=True), composition.name  # every check before the run directory
        run_dir, fresh_config = None, True
    # the scenario's (or the resumed run's) imports and --import's: recorded in config.yaml and checkpoints,
    # shipped to Ray workers through runtime_env py_modules
    config.user_modules = list(dict.fromkeys(config.user_modules + imported))

    display = None if args.quiet else ProgressDisplay()  # a live table on a terminal, plain lines otherwise
    echo = display.message if display else None
    for note in config.batch_notes() if echo and fresh_config else []:  # how the sizes combine, before it runs
        echo(f"warning: {note}")
    if echo and os.environ.get("RAY_ADDRESS") and config.env_runners_cfg.num_env_runners == 0:
        echo("note: env_runners.num_env_runners is 0, so sampling runs in this process, not on the cluster")
    fresh = run_dir is None
    if fresh:
        run_dir = make_run_dir(name, args.output)
    if echo:
        echo(f"run directory: {run_dir.resolve()}")
    progress = (lambda result: display.update(run_dir.name, result, config.stop_cfg)) if display else None
    try:
        if config.psro_cfg is not None:  # a PSRO run: epochs of best responses around the scenario's algorithm
            psro_run(config, run_dir, resume=bool(args.resume), echo=echo)
        else:
            train_run(config, run_dir, resume=bool(args.resume), echo=echo, progress=progress)
    except Exception:
        if fresh and not any(run_dir.iterdir()):
            run_dir.rmdir()  # a run that could not start (say, an unknown env) leaves no empty directory
        raise
    finally:
        if display:
            display.close()
    return 0
