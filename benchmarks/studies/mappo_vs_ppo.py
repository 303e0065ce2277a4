"""MAPPO vs shared-policy PPO on simple_spread (N=3, 25 cycles), at equal env steps, over seeds.

    .venv/bin/python benchmarks/studies/mappo_vs_ppo.py [--seeds 3] [--env-steps 300000] [--jobs 2] [--json out.json]

Both runs use the same scenario settings (scenarios/simple_spread_ppo.yaml and
scenarios/simple_spread_mappo.yaml: 8 envs x 256 steps, lr 1e-3, minibatch 512,
5 epochs, entropy 0.01, 128x128 tanh): the only differences are MAPPO's
centralised critic (it values mpe2's global state(), 54 floats, instead of the
agent's 18-float observation) and its agent-id one-hot. Each (algorithm, seed)
runs in its own process, `--jobs` at a time; both algorithms' runs of a seed
are interleaved so machine load hits them alike.

Prints the learning curves (episode return summed over the 3 agents, mean
over the episodes that ended in each env-step bucket, then mean over seeds)
and the final figure: the mean return over the last `--final-window` env
steps of each run (mean and min-max over seeds). A random policy scores about -79.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

SCENARIOS = {"PPO": "scenarios/simple_spread_ppo.yaml", "MAPPO": "scenarios/simple_spread_mappo.yaml"}


def train_curve(scenario: str, overrides: list[str]) -> tuple[list[tuple], float]:
    """Trains the scenario to its stop criterion: (per iteration (env steps at its end, mean return of the episodes
    that ended in it, their count), seconds of training after the build)."""
    import marl

    algo = marl.load_scenario(C.REPO_ROOT / scenario, overrides).build()
    curve = []
    t0 = time.perf_counter()
    try:
        while True:
            result = algo.train()
            curve.append((result["env_steps_total"], result["episode_return_mean"], result["episodes_this_iter"]))
            if algo.stop_reason(result):
                break
    finally:
        algo.stop()
    return curve, time.perf_counter() - t0


def run(algo_name: str, seed: int, env_steps: int) -> dict:
    curve, wall = train_curve(SCENARIOS[algo_name], [f"debugging.seed={seed}", f"stop.env_steps_total={env_steps}"])
    print(f"  done: {algo_name} seed {seed}, {curve[-1][0]:,} env steps in {wall:.0f} s", file=sys.stderr, flush=True)
    return {"algo": algo_name, "seed": seed, "curve": curve, "wall_s": wall}


def span(values) -> str:
    """[min, max] of a list (NaN dropped), readable with negative numbers."""
    values = [v for v in values if v == v]
    return f"[{C.fmt_num(min(values))}, {C.fmt_num(max(values))}]" if values else "-"


def bucketed(curve, bucket: int, env_steps: int) -> list[float]:
    """Episode-weighted mean return per env-step bucket."""
    n = math.ceil(env_steps / bucket)
    sums, counts = [0.0] * n, [0] * n
    for steps, ret, episodes in curve:
        if episodes and ret == ret:
            i = min(n - 1, (steps - 1) // bucket)
            sums[i] += ret * episodes
            counts[i] += episodes
    return [s / c if c else math.nan for s, c in zip(sums, counts)]


def final_return(curve, window: int, env_steps: int) -> float:
    start = max(curve[-1][0], env_steps) - window
    total = sum(r * e for s, r, e in curve if s > start and e and r == r)
    episodes = sum(e for s, r, e in curve if s > start and e and r == r)
    return total / episodes if episodes else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=300_000)
    parser.add_argument("--bucket", type=int, default=20_000, help="env steps per row of the curve table")
    parser.add_argument("--final-window", type=int, default=30_000, help="env steps at the end averaged into the final figure")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one process each)")
    parser.add_argument("--json", help="also write the raw curves here")
    args = parser.parse_args()

    jobs = [(name, seed) for seed in range(args.seeds) for name in SCENARIOS]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(run, [j[0] for j in jobs], [j[1] for j in jobs], [args.env_steps] * len(jobs)))
    wall = time.perf_counter() - t0
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f)

    by_algo = {name: [r for r in runs if r["algo"] == name] for name in SCENARIOS}
    curves = {name: [bucketed(r["curve"], args.bucket, args.env_steps) for r in rs] for name, rs in by_algo.items()}
    rows = []
    for i in range(math.ceil(args.env_steps / args.bucket)):
        row = [f"{min((i + 1) * args.bucket, args.env_steps):,}"]
        for name in SCENARIOS:
            row.append(C.fmt_num(statistics.fmean([c[i] for c in curves[name]])))
            row.append(span([c[i] for c in curves[name]]))
        rows.append(row)
    headers = ["env steps"]
    for name in SCENARIOS:
        headers += [f"{name} mean", f"{name} min-max"]
    print(f"simple_spread N=3, 25 cycles; {args.seeds} seeds; {args.env_steps:,} env steps per run; {C.machine_line()}")
    C.print_table(headers, rows, title=f"Episode return (summed over agents) per {args.bucket:,}-step bucket, mean over seeds")

    finals = {name: [final_return(r["curve"], args.final_window, args.env_steps) for r in rs] for name, rs in by_algo.items()}
    rows = []
    for name in SCENARIOS:
        rs = by_algo[name]
        rows.append([
            name,
            C.fmt_num(statistics.fmean(finals[name])),
            span(finals[name]),
            " ".join(C.fmt_num(f) for f in finals[name]),
            C.fmt_num(statistics.fmean(r["wall_s"] for r in rs)),
        ])
    C.print_table(
        ["algo", "final mean", "min-max", "per seed", "wall s/run"],
        rows,
        title=f"Final: mean return over the last {args.final_window:,} env steps of each run (random policy: about -79)",
    )
    diff = statistics.fmean(finals["MAPPO"]) - statistics.fmean(finals["PPO"])
    print(f"\nMAPPO - PPO (final, mean over seeds): {diff:+.2f}; total wall {wall:.0f} s with {args.jobs} job(s)")


if __name__ == "__main__":
    main()
