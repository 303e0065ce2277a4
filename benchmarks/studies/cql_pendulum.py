"""Continuous CQL's defaults on a mixed-quality Pendulum-v1 recording: the greedy return every 10 iterations, per seed.

    .venv/bin/python benchmarks/studies/cql_pendulum.py [--seeds 1 2 3] [--iterations 50] [--cql-alphas default 0] [--jobs 1] [key=value ...]

What `marl train --algo CQL --env Pendulum-v1 offline.input=DATA` runs (CQLConfig's defaults and
nothing else, `debugging.seed` and `training.cql_alpha` aside; overrides after the options are for
experiments, and the record's command shows them) on the recording CQL's canonical task reads:
`pendulum_mixed` of `tests/test_defaults_learn.py`, 40 episodes (8,000 rows) of a swing-up heuristic
acting at random with probability 0, 0.25, 0.5, 0.75 and 1 (returns about -130 to -1220 a level).
Every `--every` iterations the greedy policy plays `--episodes` episodes (`evaluate(explore=False)`).
cql_alpha 0 is offline SAC on the same data, the reference the conservative penalty is judged against:
does the default learn, and does it stay near its best to the last iteration rather than peak and drift.
Learning, not speed: no baseline; wall seconds are for sizing runs only (the machine is shared;
`--jobs` runs seeds side by side in their own processes, each then slower).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl  # noqa: F401  (registers marl's envs before the config is made)
from marl.algorithms import config_from_dict

sys.path.insert(0, str(C.REPO_ROOT / "tests"))
from test_defaults_learn import RECORDINGS  # noqa: E402  (the canonical task's recording, made the same way)

DATA = "pendulum_mixed"


def run_one(job: tuple[str, int], data: str, iterations: int, every: int, episodes: int, overrides: list[str]) -> dict:
    import ray

    cql_alpha, seed = job
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    settings = [f"offline.input={data}", f"debugging.seed={seed}", *overrides]
    if cql_alpha != "default":
        settings.append(f"training.cql_alpha={cql_alpha}")
    algo = config_from_dict({"algo": "CQL", "environment": {"env": "Pendulum-v1"}}, settings).build()
    t0, greedy = time.perf_counter(), {}
    try:
        for iteration in range(1, iterations + 1):
            algo.train()
            if iteration % every == 0:
                greedy[iteration] = algo.evaluate(num_episodes=episodes, explore=False)["evaluation/episode_return_mean"]
        alpha = algo.config.training_cfg.cql_alpha
    finally:
        algo.stop()
        ray.shutdown()
    return {"cql_alpha": cql_alpha, "value": alpha, "seed": seed, "greedy": greedy, "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--every", type=int, default=10, help="iterations between greedy evaluations")
    ap.add_argument("--episodes", type=int, default=20, help="greedy episodes per evaluation")
    ap.add_argument("--cql-alphas", nargs="+", default=["default", "0"], help="'default' (CQLConfig's) or a value")
    ap.add_argument("--jobs", type=int, default=1, help="runs side by side, each in its own process")
    ap.add_argument("overrides", nargs="*", help="config overrides, key=value (experiments only: the rows are the defaults')")
    args = ap.parse_args()
    print(f"continuous CQL defaults on Pendulum-v1 ({DATA}): {C.machine_line()}")
    with tempfile.TemporaryDirectory() as tmp:
        data = str(RECORDINGS[DATA](tmp))
        one = partial(run_one, data=data, iterations=args.iterations, every=args.every, episodes=args.episodes,
                      overrides=args.overrides)
        jobs = [(a, s) for a in args.cql_alphas for s in args.seeds]
        runs = []
        with ProcessPoolExecutor(max(1, args.jobs)) as pool:
            for run in pool.map(one, jobs):
                runs.append(run)
                print(f"cql_alpha {run['cql_alpha']} seed {run['seed']}: greedy {run['greedy']}")
                C.flush()
    checks = list(runs[0]["greedy"])
    rows = []
    for r in runs:
        label = f"{r['value']:g}" + (" (default)" if r["cql_alpha"] == "default" else "")
        late = [r["greedy"][i] for i in checks if 2 * i >= args.iterations]
        rows.append([label, str(r["seed"]), *(f"{r['greedy'][i]:.0f}" for i in checks), f"{min(late):.0f}",
                     f"{r['wall_s']:.0f}"])
    C.print_table(["cql_alpha", "seed", *(f"greedy at {i}" for i in checks), "worst of 2nd half", "wall s"], rows,
                  title=f"CQLConfig() on Pendulum-v1 ({DATA}{', ' + ' '.join(args.overrides) if args.overrides else ''}): "
                        f"greedy return ({args.episodes} episodes) by iteration")


if __name__ == "__main__":
    main()
