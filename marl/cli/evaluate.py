"""`marl evaluate CHECKPOINT`: greedy (or sampled) episodes from a checkpoint, or recorded to Parquet (--record)."""

from __future__ import annotations

import math
import os
import sys

from marl import path_checks
from marl.algorithms import Algorithm, CheckpointError
from marl.algorithms.record_episodes import record_episodes
from marl.cli.scenario_args import import_modules_of
from marl.policies import MappingError
from marl.policies.self_play import opponent_module_class


def _fmt(value, spec=".1f") -> str:
    return "nan" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def cmd_evaluate(args) -> int:
    if args.episodes < 1:
        print(f"marl: error: --episodes must be >= 1, got {args.episodes}", file=sys.stderr)
        return 2
    if args.record:
        path_checks.output_dir(args.record, "--record", inside=(("CHECKPOINT", args.checkpoint),))
    import_modules_of(args)  # more modules; those training imported come from the checkpoint's config
    # Evaluation needs no training runners or learner actors: build those in-process.
    overrides = ["env_runners.num_env_runners=0", "learners.num_learners=0"]
    if args.num_env_runners is not None:
        if args.num_env_runners < 0:
            print(f"marl: error: --num-env-runners must be >= 0, got {args.num_env_runners}", file=sys.stderr)
            return 2
        overrides.append(f"evaluation.evaluation_num_env_runners={args.num_env_runners}")
    if args.address:
        os.environ["RAY_ADDRESS"] = args.address  # the evaluation runners are placed on that cluster's nodes
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
    try:
        summary = record_episodes(algo, args.episodes, args.record, explore=args.explore)
    finally:
        algo.stop()
    print(f"recorded {summary['episodes']} {'sampled' if args.explore else 'greedy'} episodes of {args.checkpoint} "
          f"to {args.record}: {summary['rows']} rows in {len(summary['files'])} files; "
          f"episode_return_mean {_fmt(summary['episode_return_mean'], '.2f')}")
    return 0
