"""`marl train`: a run directory from a scenario (or --algo/--env), or `--resume RUN_DIR`.

A run directory is a local (or mounted) folder, or a filesystem URI (`--output s3://bucket/runs/x`,
`checkpointing.storage`): a URI's run is staged locally and uploaded as it goes (`marl.logging.storage`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from marl import path_checks
from marl.cli.scenario_args import composition_from_args, import_modules_of, split_positionals
from marl.config.compose import split_items
from marl.errors import ConfigError
from marl.logging import make_run_dir
from marl.logging.live import ProgressDisplay
from marl.logging.run_dir import CONFIG_FILE, run_dir_name
from marl.logging.storage import RunStorage, in_temporary_job_dir, is_uri
from marl.population.psro_run import psro_run
from marl.runtime.run_loop import RunInterrupted, config_for_resume, train_run


def cmd_train(args) -> int:
    if args.address:
        os.environ["RAY_ADDRESS"] = args.address  # Algorithm joins it instead of starting a local Ray
    if args.resume and not is_uri(args.resume):  # paths first: a refused one stops the command before anything is built
        path_checks.input_dir(args.resume, "--resume", holds=CONFIG_FILE, what="run directory")
        if args.output and not is_uri(args.output):
            path_checks.not_inside(Path(args.output), "--output", args.output, (("--resume", args.resume),))
    if args.output and not is_uri(args.output):
        path_checks.output_dir(args.output, "--output", what="run directory")
    imported = import_modules_of(args)
    storage = None
    if args.resume:
        scenario, overrides = split_positionals(args)
        if scenario is not None or args.algo or args.env or split_items(overrides)[0] or args.cfg:
            raise ConfigError("--resume takes its config from RUN_DIR/config.yaml; give only key=value overrides with it")
        if is_uri(args.resume):
            storage = _download(args.resume)
        run_dir = storage.local if storage else Path(args.resume)
        config = config_for_resume(run_dir, overrides)  # imports the modules its config.yaml records
        fresh_config = False
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
        run_dir, storage = _new_run_dir(name, args.output, config.checkpointing_cfg.storage)
    if storage is not None and config.psro_cfg is not None:
        raise ConfigError(f"{storage.uri}: a PSRO run writes its population to a local or mounted folder, not a URI")
    if echo:
        echo(f"run directory: {storage.uri} (staged in {run_dir})" if storage else f"run directory: {run_dir.resolve()}")
    label = storage.uri.rsplit("/", 1)[-1] if storage else run_dir.name
    progress = (lambda result: display.update(label, result, config.stop_cfg)) if display else None
    stopped = None
    try:
        if config.psro_cfg is not None:  # a PSRO run: epochs of best responses around the scenario's algorithm
            psro_run(config, run_dir, resume=bool(args.resume), echo=echo)
        else:
            train_run(config, run_dir, resume=bool(args.resume), echo=echo, progress=progress, storage=storage)
    except RunInterrupted as err:  # SIGINT/SIGTERM (a preemption): the checkpoint is written; not a failure
        stopped = str(err)
    except Exception:
        if fresh and storage is None and not any(run_dir.iterdir()):
            run_dir.rmdir()  # a run that could not start (say, an unknown env) leaves no empty directory
        raise
    finally:
        if display:
            display.close()
    if storage is not None:
        storage.remove_staging()  # (uploaded: train_run syncs when the run stops)
    if stopped:
        print(f"marl: {stopped}", file=sys.stderr, flush=True)  # even with --quiet: where the work went
    return 0


def _download(uri: str) -> RunStorage:
    """A run directory at a URI, downloaded into staging to be resumed there."""
    storage = RunStorage.staged(uri, "--resume")
    if not storage.exists(CONFIG_FILE):
        storage.remove_staging()
        raise ConfigError(f"--resume {uri}: is not a run directory (it has no {CONFIG_FILE})")
    storage.download()
    return storage


def _new_run_dir(name: str, output: str | None, storage_root: str | None) -> tuple[Path, RunStorage | None]:
    """(the local folder the run writes, its storage when its home is a URI): `--output`, else a new
    `<name>-<timestamp>` under checkpointing.storage, $MARL_RUNS_DIR or ./runs."""
    if output and is_uri(output):
        storage = RunStorage.staged(output, "--output")
        return storage.local, storage
    if not output and storage_root and is_uri(storage_root):
        root = RunStorage(storage_root, Path("."), "checkpointing.storage")  # (only to see which names are taken)
        uri = f"{root.uri}/{run_dir_name(name, root.exists)}"
        storage = RunStorage.staged(uri, "checkpointing.storage")
        return storage.local, storage
    if not output and not storage_root and not os.environ.get("MARL_RUNS_DIR") and in_temporary_job_dir():
        print(f"marl: note: the run directory goes into this Ray job's temporary working directory ({Path.cwd()}), "
              "which Ray deletes later; give --output (a shared folder or a URI such as s3://bucket/runs/x)",
              file=sys.stderr, flush=True)
    return make_run_dir(name, output, storage_root), None
