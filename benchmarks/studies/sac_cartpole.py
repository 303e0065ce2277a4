"""Discrete SAC's defaults on CartPole-v1: the first env step at which the mean return reaches 450, per seed.

    .venv/bin/python benchmarks/studies/sac_cartpole.py [--seeds 0 1 2] [--max-steps 100000] [--jobs 1] [key=value ...]

What `marl train --algo SAC --env CartPole-v1` runs (the config is SACConfig's defaults and
nothing else, `debugging.seed` aside; overrides after the options are for experiments, and the
record's command shows them): `train()` until an iteration's `episode_return_mean` (the
episodes the stochastic policy finished in that iteration's 1,000 env steps) reaches 450, or
`--max-steps` env steps. At that point the greedy policy plays `--greedy-episodes` episodes
(`evaluate(explore=False)`), so a lucky iteration shows as a low greedy return. The
temperature and policy entropy are SAC's learner stats of the last iteration (the target
entropy is `discrete_target_entropy_scale` x log 2). Learning, not speed: no baseline; wall
seconds are printed for sizing runs only (the machine is shared; `--jobs` runs seeds side by side
in their own processes, each then slower).
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl  # noqa: F401  (registers marl's envs before the config is made)
from marl.algorithms import config_from_dict

TARGET_RETURN = 450.0


def run_seed(seed: int, max_steps: int, greedy_episodes: int, overrides: list[str]) -> dict:
    config = config_from_dict({"algo": "SAC", "environment": {"env": "CartPole-v1"}},
                              [f"debugging.seed={seed}", *overrides])
    algo = config.build()
    t0 = time.perf_counter()
    curve, best = [], -math.inf
    try:
        while True:
            result = algo.train()
            ret = result.get("episode_return_mean", math.nan)
            steps = result["env_steps_total"]
            curve.append((steps, ret))
            best = max(best, ret) if ret == ret else best
            if (ret == ret and ret >= TARGET_RETURN) or steps >= max_steps:
                break
        wall_s = time.perf_counter() - t0
        greedy = algo.evaluate(greedy_episodes, unit="episodes", explore=False)["evaluation/episode_return_mean"]
    finally:
        algo.stop()
    return {
        "seed": seed, "steps": steps, "reached": best >= TARGET_RETURN, "best": best, "greedy": greedy,
        "alpha": result.get("losses/default_policy/alpha/alpha", math.nan),
        "entropy": result.get("losses/default_policy/actor/entropy", math.nan), "wall_s": wall_s, "curve": curve,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--max-steps", type=int, default=100_000)
    ap.add_argument("--greedy-episodes", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1, help="seeds run side by side, each in its own process")
    ap.add_argument("overrides", nargs="*", help="config overrides, key=value (experiments only: the row is the defaults')")
    args = ap.parse_args()
    print(f"discrete SAC defaults on CartPole-v1: {C.machine_line()}")
    one_seed = partial(run_seed, max_steps=args.max_steps, greedy_episodes=args.greedy_episodes, overrides=args.overrides)
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        runs = []
        for run in pool.map(one_seed, args.seeds):
            runs.append(run)
            print(f"seed {run['seed']}: curve (env steps, return) {[(s, round(r, 1)) for s, r in run['curve']]}")
            C.flush()
    rows = [[str(r["seed"]), f"{r['steps']:,}" if r["reached"] else f"not by {r['steps']:,}", f"{r['best']:.1f}",
             f"{r['greedy']:.1f}", f"{r['alpha']:.3g}", f"{r['entropy']:.3g}", f"{r['wall_s']:.0f}"] for r in runs]
    reached = sum(r["reached"] for r in runs)
    C.print_table(["seed", f"first env step with return >= {TARGET_RETURN:g}", "best return", "greedy return then",
                   "alpha then", "policy entropy then", "wall s"], rows,
                  title=f"SACConfig() on CartPole-v1{' ' + ' '.join(args.overrides) if args.overrides else ''}: "
                        f"{reached} of {len(runs)} seeds reach {TARGET_RETURN:g} within {args.max_steps:,} env steps")


if __name__ == "__main__":
    main()
