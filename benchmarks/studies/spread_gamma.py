"""The MPE family's discount on simple_spread: PPO (scenarios/simple_spread_ppo.yaml) at gamma 0.95 against 0.99.

    .venv/bin/python benchmarks/studies/spread_gamma.py [--seeds 3] [--env-steps 60000] [--jobs 2]

Three arms of the same scenario, interleaved per seed so machine load hits them alike: the family's
gamma 0.95, gamma 0.99 (what conf/task/mpe/_family.yaml set before), and gamma 0.99 with PopArt value
normalisation (is it the value scale or the discount?). For each run: the first env step at which the
mean return of the last 10 iterations passes -64 (random + 15; random scores about -79), the lowest
iteration mean (a dip below random is a policy that learned to run away) and the mean over the last
`--final-window` env steps.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
from mappo_vs_ppo import final_return, span, train_curve

SCENARIO = "scenarios/simple_spread_ppo.yaml"
ARMS = {"gamma 0.95": [], "gamma 0.99": ["training.gamma=0.99"],
        "gamma 0.99 + PopArt": ["training.gamma=0.99", "training.popart=true"]}
TARGET, WINDOW = -64.0, 10


def run(arm: str, seed: int, env_steps: int) -> dict:
    overrides = [*ARMS[arm], f"debugging.seed={seed}", f"stop.env_steps_total={env_steps}"]
    curve, _ = train_curve(SCENARIO, overrides)
    return {"arm": arm, "seed": seed, "curve": curve}


def first_past(curve) -> int | None:
    returns = [r for _, r, _ in curve]
    for i in range(WINDOW - 1, len(curve)):
        if statistics.fmean(returns[i - WINDOW + 1:i + 1]) > TARGET:
            return curve[i][0]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=60_000)
    parser.add_argument("--final-window", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    jobs = [(arm, seed) for seed in range(args.seeds) for arm in ARMS]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(run, *zip(*jobs), [args.env_steps] * len(jobs)))
    rows = []
    for arm in ARMS:
        rs = [r for r in runs if r["arm"] == arm]
        firsts = [first_past(r["curve"]) for r in rs]
        finals = [final_return(r["curve"], args.final_window, args.env_steps) for r in rs]
        rows.append([arm, " ".join(f"{f:,}" if f else "never" for f in firsts),
                     C.fmt_num(min(min(x for _, x, _ in r["curve"]) for r in rs)),
                     C.fmt_num(statistics.fmean(finals)), span(finals)])
    print(f"simple_spread N=3, 25 cycles, PPO; {args.seeds} seeds x {args.env_steps:,} env steps; {C.machine_line()}")
    C.print_table(["arm", f"first {WINDOW}-iteration mean > {TARGET:g} (per seed)", "lowest iteration",
                   "final mean", "final min-max"], rows,
                  title=f"Final: last {args.final_window:,} env steps; random about -79")
    print(f"total wall {time.perf_counter() - t0:.0f} s with {args.jobs} job(s)")


if __name__ == "__main__":
    main()
