"""The `marl` command: train, evaluate and inspect scenarios."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


def _fmt(value, spec=".1f") -> str:
    return "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def cmd_train(args) -> int:
    from marl.algorithms import load_scenario
    from marl.logging import RunLogger, make_run_dir

    config = load_scenario(args.scenario, args.overrides)
    run_dir = make_run_dir(Path(args.scenario).stem, args.output)
    algo = config.build()
    logger = RunLogger(run_dir, config.to_dict())
    if not args.quiet:
        print(f"run directory: {run_dir}")
    reason = None
    try:
        while reason is None:
            result = algo.train()
            logger.log(result)
            reason = algo.stop_reason(result)
            if not args.quiet:
                print(
                    f"iter {result['iteration']:4d}  env_steps {result['env_steps_total']:8d}  "
                    f"return {_fmt(result['episode_return_mean']):>8}  "
                    f"env_steps/s {_fmt(result['env_steps_per_s'], '.0f'):>6}  "
                    f"time {result['time_total_s']:7.1f}s",
                    flush=True,
                )
        checkpoint = algo.save(run_dir / "checkpoint")
        if not args.quiet:
            print(f"stopped: {reason}; checkpoint: {checkpoint}")
    finally:
        logger.close()
        algo.stop()
    return 0


def cmd_evaluate(args) -> int:
    from marl.algorithms import Algorithm, CheckpointError

    if args.episodes < 1:
        print(f"marl: error: --episodes must be >= 1, got {args.episodes}", file=sys.stderr)
        return 2
    # Evaluation needs no training runners or learner actors: build those in-process.
    overrides = ["env_runners.num_env_runners=0", "learners.num_learners=0"]
    try:
        algo = Algorithm.from_checkpoint(args.checkpoint, overrides=overrides)
    except CheckpointError as err:
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    try:
        result = algo.evaluate(args.episodes, unit="episodes", explore=args.explore or None)
    finally:
        algo.stop()
    print(f"checkpoint {args.checkpoint} (iteration {algo.iteration}): {result['evaluation/episodes']} episodes, "
          f"{'sampled' if args.explore else 'greedy'} actions")
    for key, value in result.items():
        print(f"{key}: {_fmt(value, '.2f') if isinstance(value, float) else value}")
    return 0


def cmd_graph(args) -> int:
    from marl.algorithms import load_scenario

    config = load_scenario(args.scenario, args.overrides)
    from marl.workflow import Workflow

    wf = config.workflow
    wf = config.default_workflow() if wf is None else (Workflow.from_dict(wf) if isinstance(wf, dict) else wf)
    print(wf.validate().describe())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="marl", description="Multi-agent RL declared as a dataflow graph.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a scenario", description="Train a scenario file until its stop criteria.")
    train.add_argument("scenario", help="scenario YAML file")
    train.add_argument("overrides", nargs="*", help="key=value overrides, e.g. training.lr=1e-4 stop.iterations=5")
    train.add_argument("--output", help="run directory (default: runs/<scenario>-<timestamp>)")
    train.add_argument("--quiet", action="store_true", help="print nothing per iteration")
    train.set_defaults(fn=cmd_train)

    evaluate = sub.add_parser("evaluate", help="evaluate a checkpoint", description="Run greedy episodes from a checkpoint.")
    evaluate.add_argument("checkpoint", help="checkpoint directory (a run's checkpoint/)")
    evaluate.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    evaluate.add_argument("--explore", action="store_true", help="sample actions instead of acting greedily")
    evaluate.set_defaults(fn=cmd_evaluate)

    graph = sub.add_parser("graph", help="print a scenario's workflow graph", description="Print the workflow's operators and edges.")
    graph.add_argument("scenario", help="scenario YAML file")
    graph.add_argument("overrides", nargs="*", help="key=value overrides")
    graph.set_defaults(fn=cmd_graph)
    return parser


def main(argv: list[str] | None = None) -> int:
    from marl.algorithms.sections import ConfigError
    from marl.envs import EnvError
    from marl.policies import MappingError
    from marl.workflow import WorkflowError

    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (ConfigError, EnvError, MappingError, WorkflowError, FileNotFoundError) as err:
        print(f"marl: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("marl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
