"""The `marl` command: train, evaluate and inspect scenarios.

    marl train SCENARIO.yaml [key=value ...]        marl train --algo PPO --env CartPole-v1 [key=value ...]
    marl train algorithm=mappo task=vmas/balance [experiment=NAME] [key=value ...] [--cfg]
    marl configs [GROUP]
    marl train --resume RUN_DIR [key=value ...]     marl evaluate CHECKPOINT
    marl graph SCENARIO.yaml [--psro]                marl plot RUN_DIR [RUN_DIR ...]
    marl league DIR
    marl envs                                        marl defaults ALGO
    marl reference [ALGO ...]                        marl experiment SUITE.yaml
    marl report RUNS_DIR                             marl serve SCENARIO.yaml --port 9900
"""

from __future__ import annotations

import argparse
import sys

from marl.algorithms import CheckpointError
from marl.cli.configs import cmd_configs
from marl.cli.envs import cmd_envs
from marl.cli.evaluate import cmd_evaluate
from marl.cli.experiment import add_parsers as add_experiment_parsers
from marl.cli.graph import cmd_graph
from marl.cli.league import cmd_league
from marl.cli.plot import cmd_plot
from marl.cli.reference import cmd_defaults, cmd_reference
from marl.cli.scenario_args import add_source_options, algorithm_names
from marl.cli.serve import add_parser as add_serve_parser
from marl.cli.train import cmd_train
from marl.errors import ConfigError
from marl.envs import EnvError
from marl.errors import ClusterError
from marl.envs.catalog import KINDS
from marl.policies import MappingError
from marl.execution.user_code import add_import_option
from marl.workflow import WorkflowError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="marl", description="Multi-agent RL declared as a dataflow graph.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = sub.add_parser(
        "train", help="train a scenario",
        description="Train a scenario until its stop criteria, printing one progress line per iteration and "
                    "writing a run directory: config.yaml, result.jsonl, progress.csv, TensorBoard events, checkpoint/.",
        epilog="examples:\n  marl train scenarios/cartpole_ppo.yaml training.lr=1e-3\n"
               "  marl train algorithm=mappo task=vmas/balance training.lr=1e-4 --cfg\n"
               "  marl train --algo PPO --env CartPole-v1 stop.iterations=20\n"
               "  marl train --resume runs/cartpole_ppo-20250101-120000 stop.iterations=40",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_options(train, "train")
    train.add_argument("--output", metavar="RUN_DIR",
                       help="run directory: a folder, or a filesystem URI (file://, s3://, gs://, ...: staged locally, "
                            "uploaded after each checkpoint and at the end) (default: checkpointing.storage, "
                            "$MARL_RUNS_DIR or ./runs, then <scenario>-<timestamp>)")
    train.add_argument("--resume", metavar="RUN_DIR",
                       help="continue a stopped run (a folder or a URI) from RUN_DIR/checkpoint (weights, counters, "
                            "iteration) with its config.yaml")
    train.add_argument("--quiet", action="store_true", help="print nothing (no progress lines)")
    train.add_argument("--cfg", action="store_true",
                       help="print the composed config, each key with the file and line (or command line) it came from, "
                            "and exit; nothing is written")
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
    evaluate.add_argument(
        "--address", metavar="ADDRESS",
        help="join this Ray cluster (as RAY_ADDRESS does, e.g. 10.0.0.1:6379 or auto); the evaluation runner "
             "actors are placed on its nodes",
    )
    evaluate.add_argument(
        "--num-env-runners", type=int, metavar="N",
        help="evaluation runner actors sharing the episodes (default: the checkpoint's "
             "evaluation.evaluation_num_env_runners; 0: in this process)",
    )
    add_import_option(evaluate)
    evaluate.set_defaults(fn=cmd_evaluate)

    graph = sub.add_parser(
        "graph", help="print and draw a scenario's workflow graph",
        description="Print the workflow's operators and edges and write a PNG of the DAG "
                    "(operators with their settings, edges labelled with what flows).",
    )
    add_source_options(graph, "show the default workflow of")
    graph.add_argument("--output", "-o", metavar="PNG", help="where to write the picture (default: <scenario>_workflow.png)")
    graph.add_argument("--no-png", action="store_true", help="only print the operators and edges")
    graph.add_argument(
        "--psro", action="store_true",
        help="draw the PSRO loop (payoff table -> meta-solver -> best response against the mixture -> add member -> "
             "evaluate payoffs) whose best responses the scenario trains (implied by a scenario with a psro: section); "
             "PSRO settings from that section, or as psro.KEY=VALUE (psro.meta_solver=prd, psro.iterations_per_epoch=20, ...)",
    )
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
                    "population saved by PSRO (population.json); for a league run directory (multi_agent.league), the "
                    "ratings from its checkpoint, the win-rate matrix and the curves over env steps.",
    )
    league.add_argument("run_dir", metavar="DIR", help="the folder PSRO.save wrote, a run directory with population/, or a league run directory")
    league.add_argument("--output", "-o", metavar="DIR", help="folder for the files (default: beside population.json)")
    league.set_defaults(fn=cmd_league)

    envs = sub.add_parser(
        "envs", help="list env families and names",
        description="List the names environment.env accepts: register_env names, PettingZoo modules, Gymnasium ids.",
    )
    envs.add_argument("--family", choices=KINDS, help="list only this kind")
    add_import_option(envs)
    envs.set_defaults(fn=cmd_envs)

    defaults = sub.add_parser(
        "defaults", help="print an algorithm's defaults as YAML",
        description="Print every key a scenario of ALGO may set, with its default value, as YAML "
                    "(a valid scenario file once environment.env is set).",
    )
    defaults.add_argument("algo", metavar="ALGO", type=str.upper, choices=algorithm_names(),
                          help=f"the algorithm (one of: {', '.join(algorithm_names())})")
    defaults.set_defaults(fn=cmd_defaults)

    configs = sub.add_parser(
        "configs", help="list the config groups (algorithm, task, experiment) and their options",
        description="List the config groups under conf/ and their options, for `marl train algorithm=NAME "
                    "task=FAMILY/TASK experiment=NAME` and a scenario's `defaults:` list.",
    )
    configs.add_argument("group", nargs="?", metavar="GROUP", help="only this group (algorithm, task, experiment)")
    configs.set_defaults(fn=cmd_configs)

    reference = sub.add_parser(
        "reference", help="print the scenario reference with algorithms' training keys",
        description="Print the scenario reference (markdown): every section's keys with type, default, allowed "
                    "values and meaning, and the training keys of each algorithm named (all without ALGO).",
    )
    reference.add_argument("algos", nargs="*", metavar="ALGO", type=str.upper,
                           help="algorithms whose training table to include (default: every algorithm)")
    reference.set_defaults(fn=cmd_reference)


    add_experiment_parsers(sub)  # marl experiment SUITE.yaml, marl report RUNS_DIR


    add_serve_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
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
    except (ConfigError, CheckpointError, ClusterError, EnvError, MappingError, WorkflowError, FileNotFoundError,
            ImportError) as err:
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("marl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
