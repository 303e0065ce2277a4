"""APPO's trust region centred on a target policy against one centred on the behaviour policy, as lag grows.

    .venv/bin/python benchmarks/studies/appo_lag.py [--seeds 3] [--cap 250000]

Runs `scenarios/cartpole_appo.yaml` (2 Ray runners) to a mean return of 450 in
four settings: the scenario's own lag, and a higher one (`broadcast_interval=8`,
4 requests in flight per runner, lag bound 40), each with the target policy
(`training.target_network_update_freq`, the default) and without it (null: the
PPO ratio is taken against the behaviour policy that sampled the batch). Each
run is a fresh process; both variants of a seed run back to back. Prints env
steps to 450 per seed (a run that does not get there within `--cap` env steps
shows "> cap") and the largest policy lag each run reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

HIGH_LAG = ["training.broadcast_interval=8", "training.max_requests_in_flight_per_env_runner=4", "training.max_policy_lag=40"]
SETTINGS = {
    "scenario lag, target policy": [],
    "scenario lag, behaviour policy": ["training.target_network_update_freq=null"],
    "high lag, target policy": HIGH_LAG,
    "high lag, behaviour policy": HIGH_LAG + ["training.target_network_update_freq=null"],
}

RUN = """
import json, sys, marl
overrides = json.loads(sys.argv[1])
algo = marl.load_scenario("scenarios/cartpole_appo.yaml", overrides).build()
lag = 0
try:
    while True:
        result = algo.train()
        lag = max(lag, result.get("perf/policy_lag_max", 0))
        if algo.stop_reason(result):
            break
finally:
    algo.stop()
print("RESULT", json.dumps({"env_steps": result["env_steps_total"], "return": result["episode_return_mean"], "lag": lag}))
"""


def run(seed: int, overrides: list[str], cap: int) -> dict:
    args = [f"debugging.seed={seed}", f"stop.env_steps_total={cap}", *overrides]
    out = subprocess.run([sys.executable, "-c", RUN, json.dumps(args)], cwd=C.REPO_ROOT, capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"run failed ({args}):\n{out.stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result["reached"] = result["return"] >= 450
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cap", type=int, default=250_000, help="env steps before a run gives up")
    args = parser.parse_args()
    results = {name: [] for name in SETTINGS}
    for seed in range(args.seeds):
        for name, overrides in SETTINGS.items():
            r = run(seed, overrides, args.cap)
            results[name].append(r)
            print(f"  seed {seed}, {name}: {r['env_steps']:,} env steps, return {r['return']:.0f}, max lag {r['lag']}", flush=True)
    print(C.machine_line())
    rows = []
    for name, runs in results.items():
        steps = [r["env_steps"] if r["reached"] else float("inf") for r in runs]
        shown = [f"{s:,}" if s != float("inf") else f"> {args.cap:,}" for s in steps]
        median = statistics.median(steps)
        rows.append([name, " / ".join(shown), f"{median:,.0f}" if median != float("inf") else f"> {args.cap:,}",
                     f"{sum(r['reached'] for r in runs)}/{len(runs)}", max(r["lag"] for r in runs)])
    C.print_table(["setting", "env steps to 450 per seed", "median", "reached", "max lag"], rows,
                  title="APPO CartPole (2 Ray runners) to a mean return of 450")


if __name__ == "__main__":
    main()
