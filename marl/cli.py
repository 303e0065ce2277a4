"""The `marl` command: train, evaluate and inspect scenarios.

    marl train SCENARIO.yaml [key=value ...]        marl train --algo PPO --env CartPole-v1 [key=value ...]
    marl train --resume RUN_DIR [key=value ...]     marl evaluate CHECKPOINT
    marl graph SCENARIO.yaml                         marl plot RUN_DIR [RUN_DIR ...]
    marl envs                                        marl defaults ALGO
    marl reference [ALGO ...]                        marl experiment SUITE.yaml
    marl report RUNS_DIR                             marl serve SCENARIO.yaml --port 9900
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path

from marl import path_checks
from marl.logging.run_dir import CONFIG_FILE
from marl.runners.user_code import add_import_option, import_user_modules


def _fmt(value, spec=".1f") -> str:
    return "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _algorithm_names() -> list[str]:
    from marl.algorithms.registry import discovered

    return list(discovered())


def _split_positionals(args) -> tuple[str | None, list[str]]:
    """The scenario file and the key=value overrides, in whatever order they came (options between them
    too): an item with '=' that is not a file is an override, the one other item is the scenario."""
    from marl.algorithms import ConfigError

    items = ([args.scenario] if args.scenario is not None else []) + list(args.overrides) + list(args.extra_positionals)
    overrides = [item for item in items if "=" in item and not Path(item).is_file()]
    scenarios = [item for item in items if item not in overrides]
    if len(scenarios) > 1:
        raise ConfigError(
            f"one scenario file at most, got {scenarios}; overrides look like key=value (training.lr=1e-4)"
        )
    return (scenarios[0] if scenarios else None), overrides


def _import_user_modules(args) -> list[str]:
    """`--import MODULE`: modules that register envs (marl.register_env) or define classes a scenario names."""
    return import_user_modules(getattr(args, "imports", []) or [])


def _config_from_args(args):
    """(config, name for the run directory) from a scenario file or from --algo/--env."""
    from marl.algorithms import ConfigError, config_from_dict, load_scenario

    scenario, overrides = _split_positionals(args)
    env = getattr(args, "env", None)
    if scenario is not None:
        if args.algo:
            raise ConfigError("give either a scenario file or --algo, not both (the scenario names its algo)")
        if env:
            overrides = [f"environment.env={env}"] + overrides
        path_checks.input_file(scenario, "scenario")
        return load_scenario(scenario, overrides), Path(scenario).stem
    if not args.algo:
        raise ConfigError("give a scenario file (marl train scenarios/cartpole_ppo.yaml) or --algo NAME --env ENV")
    data = {"algo": args.algo, "environment": {"env": env} if env else {}}
    name = f"{args.algo}-{env}" if env else args.algo
    return config_from_dict(data, overrides, where="command line"), re.sub(r"[^\w.-]+", "_", name)


def cmd_train(args) -> int:
    from marl.logging import make_run_dir
    from marl.run import config_for_resume, train_run

    if args.address:
        os.environ["RAY_ADDRESS"] = args.address  # Algorithm joins it instead of starting a local Ray
    if args.resume:  # paths first: a refused one stops the command before anything is imported or built
        path_checks.input_dir(args.resume, "--resume", holds=CONFIG_FILE, what="run directory")
        if args.output:
            path_checks.not_inside(Path(args.output), "--output", args.output, (("--resume", args.resume),))
    if args.output:
        path_checks.output_dir(args.output, "--output", what="run directory")
    imported = _import_user_modules(args)
    if args.resume:
        scenario, overrides = _split_positionals(args)
        if scenario is not None or args.algo or args.env:
            from marl.algorithms import ConfigError

            raise ConfigError("--resume takes its config from RUN_DIR/config.yaml; give only key=value overrides with it")
        config = config_for_resume(args.resume, overrides)  # imports the modules its config.yaml records
        run_dir = Path(args.resume)
    else:
        config, name = _config_from_args(args)
        run_dir = None
    # the scenario's (or the resumed run's) imports and --import's: recorded in config.yaml and checkpoints,
    # shipped to Ray workers through runtime_env py_modules
    config.user_modules = list(dict.fromkeys(config.user_modules + imported))
    from marl.logging.live import ProgressDisplay

    display = None if args.quiet else ProgressDisplay()  # a live table on a terminal, plain lines otherwise
    echo = display.message if display else None
    if echo and os.environ.get("RAY_ADDRESS") and config.env_runners_cfg.num_env_runners == 0:
        echo("note: env_runners.num_env_runners is 0, so sampling runs in this process, not on the cluster")
    fresh = run_dir is None
    if fresh:
        config.validate()
        run_dir = make_run_dir(name, args.output)
    if echo:
        echo(f"run directory: {run_dir.resolve()}")
    progress = (lambda result: display.update(run_dir.name, result, config.stop_cfg)) if display else None
    try:
        train_run(config, run_dir, resume=bool(args.resume), echo=echo, progress=progress)
    except Exception:
        if fresh and not any(run_dir.iterdir()):
            run_dir.rmdir()  # a run that could not start (say, an unknown env) leaves no empty directory
        raise
    finally:
        if display:
            display.close()
    return 0


def cmd_evaluate(args) -> int:
    from marl.algorithms import Algorithm, CheckpointError
    from marl.policies.mapping import MappingError
    from marl.policies.self_play import opponent_module_class

    if args.episodes < 1:
        print(f"marl: error: --episodes must be >= 1, got {args.episodes}", file=sys.stderr)
        return 2
    if args.record:
        path_checks.output_dir(args.record, "--record", inside=(("CHECKPOINT", args.checkpoint),))
    _import_user_modules(args)  # more modules; those training imported come from the checkpoint's config
    # Evaluation needs no training runners or learner actors: build those in-process.
    overrides = ["env_runners.num_env_runners=0", "learners.num_learners=0"]
    try:
        algo = Algorithm.from_checkpoint(args.checkpoint, overrides=overrides)
    except CheckpointError as err:
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    if args.record:
        return _record_evaluation(algo, args)
    try:
        if args.opponent is not None:  # checked before any episode runs: one line naming what is wrong
            if algo.config.seated_pool() is None:
                raise MappingError(f"--opponent {args.opponent!r} needs a self-play run (multi_agent.self_play or "
                                   "multi_agent.league); this checkpoint has none")
            opponent_module_class(args.opponent, "--opponent")
        result = algo.evaluate(args.episodes, unit="episodes", explore=args.explore or None, opponent=args.opponent)
    except MappingError as err:
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    finally:
        algo.stop()
    against = f" against {args.opponent}" if args.opponent else ""
    print(f"checkpoint {args.checkpoint} (iteration {algo.iteration}): {result['evaluation/episodes']} episodes{against}, "
          f"{'sampled' if args.explore else 'greedy'} actions")
    for key, value in result.items():
        if not isinstance(value, list):  # the per-episode lists: their min/mean/max are printed
            print(f"{key}: {_fmt(value, '.2f') if isinstance(value, float) else value}")
    return 0


def _record_evaluation(algo, args) -> int:
    from marl.algorithms.record_episodes import record_episodes

    try:
        summary = record_episodes(algo, args.episodes, args.record, explore=args.explore)
    finally:
        algo.stop()
    print(f"recorded {summary['episodes']} {'sampled' if args.explore else 'greedy'} episodes of {args.checkpoint} "
          f"to {args.record}: {summary['rows']} rows in {len(summary['files'])} files; "
          f"episode_return_mean {_fmt(summary['episode_return_mean'], '.2f')}")
    return 0


def cmd_graph(args) -> int:
    from marl.algorithms.algorithm import workflow_for
    from marl.workflow.draw import draw_workflow

    if args.output and not args.no_png:
        path_checks.output_file(args.output, "--output")
    _import_user_modules(args)
    config, name = _config_from_args(args)
    wf = workflow_for(config)  # the graph a run of this config runs, its evaluate node included
    print(wf.describe())
    if not args.no_png:
        png = Path(args.output or f"{name}_workflow.png")
        png.parent.mkdir(parents=True, exist_ok=True)
        print(f"picture: {draw_workflow(wf, png, title=f'{name}: workflow {wf.name!r}')}")
    return 0


def cmd_plot(args) -> int:
    from marl.logging.plots import plot_runs

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


def cmd_league(args) -> int:
    from marl.population.report import write_league_report

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


def cmd_envs(args) -> int:
    from marl.envs.catalog import env_catalog

    _import_user_modules(args)  # modules that call marl.register_env when imported
    catalog = env_catalog()
    kinds = [args.family] if args.family else list(catalog)
    for kind in kinds:
        print(f"{kind}:")
        for family, names in catalog[kind].items():
            if isinstance(names, str):
                print(f"  {family}: {names}")
            else:
                print(f"  {family} ({len(names)}): {', '.join(names) if names else '-'}")
    if not args.family or args.family == "registered":
        print("(registered names exist per process: pass --import MODULE for modules that call marl.register_env)")
    return 0


def cmd_defaults(args) -> int:
    from marl.algorithms.reference import defaults_yaml

    print(defaults_yaml(args.algo), end="")
    return 0


def cmd_reference(args) -> int:
    from marl.algorithms.reference import scenario_reference

    print(scenario_reference(args.algos or _algorithm_names()), end="")
    return 0


def _add_source_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("scenario", nargs="?", help="scenario YAML file (or use --algo/--env)")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value",
        help="config overrides on top of the scenario, e.g. training.lr=1e-4 stop.iterations=5 "
             "(every key: docs/scenario_reference.md)",
    )
    parser.add_argument(
        "--algo", choices=_algorithm_names(), type=str.upper,
        help=f"{what} this algorithm with its defaults instead of a scenario file (one of: {', '.join(_algorithm_names())})",
    )
    parser.add_argument("--env", help="environment.env: a Gymnasium id (module:Id imports its module first), "
                        "PettingZoo module path, vmas.<scenario> or registered name (see `marl envs`)")
    add_import_option(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="marl", description="Multi-agent RL declared as a dataflow graph.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser(
        "train", help="train a scenario",
        description="Train a scenario until its stop criteria, printing one progress line per iteration and "
                    "writing a run directory: config.yaml, result.jsonl, progress.csv, TensorBoard events, checkpoint/.",
        epilog="examples:\n  marl train scenarios/cartpole_ppo.yaml training.lr=1e-3\n"
               "  marl train --algo PPO --env CartPole-v1 stop.iterations=20\n"
               "  marl train --resume runs/cartpole_ppo-20250101-120000 stop.iterations=40",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_source_options(train, "train")
    train.add_argument("--output", metavar="RUN_DIR", help="run directory (default: $MARL_RUNS_DIR or ./runs, then <scenario>-<timestamp>)")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue a stopped run from RUN_DIR/checkpoint (weights, counters, iteration) with its config.yaml")
    train.add_argument("--quiet", action="store_true", help="print nothing (no progress lines)")
    train.add_argument(
        "--address", metavar="ADDRESS",
        help="join this Ray cluster (as RAY_ADDRESS does, e.g. 10.0.0.1:6379 or auto); env runners are spread over its nodes",
    )
    train.set_defaults(fn=cmd_train)

    evaluate = sub.add_parser("evaluate", help="evaluate a checkpoint", description="Run greedy episodes from a checkpoint.")
    evaluate.add_argument("checkpoint", help="checkpoint directory (a run's checkpoint/)")
    evaluate.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    evaluate.add_argument("--explore", action="store_true", help="sample actions instead of acting greedily")
    evaluate.add_argument(
        "--opponent", metavar="OPPONENT",
        help="self-play checkpoints: play this fixed opponent instead of the pool, 'random' (uniform over legal moves) "
             "or an RLModule class path 'pkg.module:Class'; prints evaluation/self_play/win_rate",
    )
    evaluate.add_argument("--record", metavar="DIR",
                          help="write the episodes' rows to DIR in the offline format (docs/offline_format.md)")
    add_import_option(evaluate)
    evaluate.set_defaults(fn=cmd_evaluate)

    graph = sub.add_parser(
        "graph", help="print and draw a scenario's workflow graph",
        description="Print the workflow's operators and edges and write a PNG of the DAG "
                    "(operators with their settings, edges labelled with what flows).",
    )
    _add_source_options(graph, "show the default workflow of")
    graph.add_argument("--output", "-o", metavar="PNG", help="where to write the picture (default: <scenario>_workflow.png)")
    graph.add_argument("--no-png", action="store_true", help="only print the operators and edges")
    graph.set_defaults(fn=cmd_graph)

    plot = sub.add_parser(
        "plot", help="plot runs' returns and throughput",
        description="Write returns.png (mean return overall and per policy vs env steps) and throughput.png "
                    "(env steps/s vs env steps, env steps vs time), overlaying the runs given.",
    )
    plot.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (with result.jsonl)")
    plot.add_argument("--output", "-o", metavar="DIR", help="folder for the PNGs (default: the run directory, or ./plots for several)")
    plot.set_defaults(fn=cmd_plot)

    league = sub.add_parser(
        "league", help="ratings table, payoff heat map and rating curves of a population",
        description="Write ratings.md (members by openskill rating, with Elo, games, mean score, meta-strategy weight), "
                    "payoffs.png (payoff table and win-rate matrix) and ratings.png (rating curves, NashConv) for a "
                    "population saved by PSRO (population.json).",
    )
    league.add_argument("run_dir", metavar="DIR", help="the folder PSRO.save wrote, or a run directory with population/")
    league.add_argument("--output", "-o", metavar="DIR", help="folder for the files (default: beside population.json)")
    league.set_defaults(fn=cmd_league)

    envs = sub.add_parser(
        "envs", help="list env families and names",
        description="List the names environment.env accepts: register_env names, PettingZoo modules, Gymnasium ids.",
    )
    envs.add_argument("--family", choices=("registered", "pettingzoo", "gymnasium", "vmas", "openspiel"), help="list only this kind")
    add_import_option(envs)
    envs.set_defaults(fn=cmd_envs)

    defaults = sub.add_parser(
        "defaults", help="print an algorithm's defaults as YAML",
        description="Print every key a scenario of ALGO may set, with its default value, as YAML "
                    "(a valid scenario file once environment.env is set).",
    )
    defaults.add_argument("algo", metavar="ALGO", type=str.upper, choices=_algorithm_names(),
                          help=f"the algorithm (one of: {', '.join(_algorithm_names())})")
    defaults.set_defaults(fn=cmd_defaults)

    reference = sub.add_parser(
        "reference", help="print the scenario reference with algorithms' training keys",
        description="Print the scenario reference (markdown): every section's keys with type, default, allowed "
                    "values and meaning, and the training keys of each algorithm named (all without ALGO).",
    )
    reference.add_argument("algos", nargs="*", metavar="ALGO", type=str.upper,
                           help="algorithms whose training table to include (default: every algorithm)")
    reference.set_defaults(fn=cmd_reference)

    from marl.experiment.commands import add_parsers as add_experiment_parsers

    add_experiment_parsers(sub)  # marl experiment SUITE.yaml, marl report RUNS_DIR

    from marl.serve_command import add_parser as add_serve_parser

    add_serve_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from marl.algorithms import CheckpointError
    from marl.algorithms.sections import ConfigError
    from marl.envs import EnvError
    from marl.policies import MappingError
    from marl.workflow import WorkflowError

    parser = build_parser()
    # Options may come between and after a command's positionals (`marl train S.yaml --output D k=v`):
    # what argparse leaves over after the options is more positionals, for the commands that take them.
    args, extra = parser.parse_known_args(argv)
    unknown = [item for item in extra if item.startswith("-")]
    if unknown or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(unknown or extra)}")
    args.extra_positionals = extra
    try:
        return args.fn(args)
    except (ConfigError, CheckpointError, EnvError, MappingError, WorkflowError, FileNotFoundError, ImportError) as err:
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("marl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
