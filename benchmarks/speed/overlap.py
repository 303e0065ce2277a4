"""Overlapped sampling (`env_runners.overlap`) against the synchronous default, at equal env steps, over seeds.

    .venv/bin/python benchmarks/speed/overlap.py [--seeds 3] [--tasks cartpole,spread] [--modes sync,overlap,overlap_x2,...]
                                           [--spread-steps 100000] [--json out.json]

For each task and seed one run per mode, back to back (the order rotates with the seed), each
in a fresh process:

* sync: the scenario as it is (in-process sampling, strictly synchronous: the default);
* overlap: the same scenario with `env_runners.num_env_runners=1 env_runners.overlap=true`:
  one runner actor samples the next round while the in-process learner trains on this one;
  a round is half a train batch (`env_runners.overlap_round: half_batch`, the default), so
  only the first half of each batch lags the learner by an update;
* overlap_fragment: overlap with `overlap_round=fragment`: a round is the runner's whole
  fragment (a whole train batch here), every row one update behind;
* overlap_x2: overlap with two runner actors of 4 envs each (8 envs in all, as the scenario),
  so sampling gets both cores while the learner's update runs beside it;
* overlap_x2_fragment: overlap_x2 with whole-batch rounds (`overlap_round=fragment`): the runners
  sample all of the next batch while the learner trains on this one (every row one update behind);
* sync_torch_acting, overlap_x2_torch_acting: sync and overlap_x2 with `env_runners.numpy_acting=false`
  (runners act through the modules' torch passes, not their NumPy copies: that change's A/B).

Tasks: `cartpole` (scenarios/cartpole_ppo.yaml, up to --cartpole-steps env steps: time and
env steps to a mean return of 450, measured from the end of the build, and the build itself,
Ray's start-up included), `spread` (scenarios/simple_spread_ppo.yaml, --spread-steps env steps:
env steps/s including learning, against the env's own random-action rate measured in this
invocation just before and after each run, `sampling.py`'s loop over 8 envs, and the return).

Prints the learning curves (mean return over the episodes that ended in each env-step bucket,
mean and min-max over seeds) and a summary table. The machine is shared: say so next to any figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

SCENARIOS = {"cartpole": "scenarios/cartpole_ppo.yaml", "spread": "scenarios/simple_spread_ppo.yaml"}
OVERLAP = ["env_runners.num_env_runners=1", "env_runners.overlap=true"]
OVERLAP_X2 = ["env_runners.num_env_runners=2", "env_runners.overlap=true", "env_runners.num_envs_per_env_runner=4"]
WHOLE_BATCH = ["env_runners.overlap_round=fragment"]
MODES = {
    "sync": [],
    "overlap": OVERLAP,
    "overlap_fragment": OVERLAP + WHOLE_BATCH,
    "overlap_x2": OVERLAP_X2,
    "overlap_x2_fragment": OVERLAP_X2 + WHOLE_BATCH,
    # The same two, acting through the modules' torch passes (the NumPy copies' A/B, marl.modules.numpy_acting).
    "overlap_x2_torch_acting": OVERLAP_X2 + ["env_runners.numpy_acting=false"],
    "sync_torch_acting": ["env_runners.numpy_acting=false"],
}


def run_one(task: str, mode: str, seed: int, env_steps: int) -> dict:
    """One training run in this process: its curve and timings (the child's side)."""
    t_start = time.perf_counter()
    import marl

    overrides = MODES[mode] + [f"debugging.seed={seed}", f"stop.env_steps_total={env_steps}", "stop.episode_return_mean=null"]
    algo = marl.load_scenario(C.REPO_ROOT / SCENARIOS[task], overrides).build()
    t_built = time.perf_counter()
    curve, to_450 = [], None
    try:
        while True:
            r = algo.train()
            now = time.perf_counter()
            curve.append((r["env_steps_total"], r["episode_return_mean"], r["episodes_this_iter"], now - t_built,
                          r.get("perf/policy_lag_mean", 0.0)))
            if to_450 is None and r["episode_return_mean"] >= 450:
                to_450 = (now - t_built, r["env_steps_total"])
                if task == "cartpole":
                    break
            if r["env_steps_total"] >= env_steps:
                break
    finally:
        algo.stop()
    return {"task": task, "mode": mode, "seed": seed, "curve": curve, "build_s": t_built - t_start,
            "to_450": to_450, "steps_per_s": curve[-1][0] / curve[-1][3]}


def spawn(task: str, mode: str, seed: int, env_steps: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps([task, mode, seed, env_steps])],
                         capture_output=True, text=True, cwd=C.REPO_ROOT)
    if out.returncode:
        raise RuntimeError(f"{task}/{mode}/seed {seed} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {task} {mode} seed {seed}: {result['curve'][-1][0]:,} env steps, {result['steps_per_s']:.0f}/s, "
          f"to 450: {result['to_450']}", file=sys.stderr, flush=True)
    return result


def raw_env_rate(seconds: float) -> float:
    """simple_spread's own random-action rate, 8 envs in lockstep (sampling.py's loop)."""
    from sampling import SPREAD_CONFIG, RandomLoop

    loop = RandomLoop("mpe2.simple_spread_v3", SPREAD_CONFIG, 8, inline=False, seed=0)
    steps, elapsed = C.run_for(seconds, lambda: loop.run(64))
    return steps / elapsed


def bucketed(curve, bucket: int, env_steps: int) -> list[float]:
    n = math.ceil(env_steps / bucket)
    sums, counts = [0.0] * n, [0] * n
    for steps, ret, episodes, *_ in curve:
        if episodes and ret == ret:
            i = min(n - 1, (steps - 1) // bucket)
            sums[i] += ret * episodes
            counts[i] += episodes
    return [s / c if c else math.nan for s, c in zip(sums, counts)]


def span(values) -> str:
    values = [v for v in values if v == v]
    return f"[{C.fmt_num(min(values))}, {C.fmt_num(max(values))}]" if values else "-"


def mean(values) -> float:
    values = [v for v in values if v == v]
    return statistics.fmean(values) if values else math.nan


def curve_table(runs: list[dict], task: str, bucket: int, env_steps: int) -> None:
    modes = list(dict.fromkeys(r["mode"] for r in runs))
    curves = {m: [bucketed(r["curve"], bucket, env_steps) for r in runs if r["task"] == task and r["mode"] == m] for m in modes}
    rows = []
    for i in range(math.ceil(env_steps / bucket)):
        row = [f"{min((i + 1) * bucket, env_steps):,}"]
        for m in modes:
            row += [C.fmt_num(mean([c[i] for c in curves[m]])), span([c[i] for c in curves[m]])]
        rows.append(row)
    headers = ["env steps"] + [h for m in modes for h in (f"{m} mean", f"{m} min-max")]
    C.print_table(headers, rows, title=f"{task}: episode return per {bucket:,}-step bucket, mean over seeds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", default="cartpole,spread")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {list(MODES)}")
    parser.add_argument("--cartpole-steps", type=int, default=60_000)
    parser.add_argument("--spread-steps", type=int, default=100_000)
    parser.add_argument("--raw-seconds", type=float, default=5.0)
    parser.add_argument("--json", help="also write the raw runs here")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(*json.loads(args.child))))
        return

    tasks = [t for t in args.tasks.split(",") if t]
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; known: {list(MODES)}")
    steps = {"cartpole": args.cartpole_steps, "spread": args.spread_steps}
    print(C.machine_line(), flush=True)
    runs, raw = [], []
    for task in tasks:
        for seed in range(args.seeds):
            shift = seed % len(modes)
            for mode in modes[shift:] + modes[:shift]:  # each mode goes first once every len(modes) seeds
                if task == "spread" and not raw:
                    raw.append(raw_env_rate(args.raw_seconds))
                runs.append(spawn(task, mode, seed, steps[task]))
                if task == "spread":  # this VM's speed drifts by 25 % within minutes: each run against its neighbours
                    raw.append(raw_env_rate(args.raw_seconds))
                    runs[-1]["raw_env_rate"] = (raw[-2] + raw[-1]) / 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "raw_env_rate": raw, "machine": C.machine_line()}, f)

    print(f"\n{C.machine_line()} (at the end)")
    for task in tasks:
        curve_table(runs, task, 10_000 if task == "cartpole" else 20_000, steps[task])
    rows = []
    for task in tasks:
        for m in modes:
            rs = [r for r in runs if r["task"] == task and r["mode"] == m]
            reached = [r["to_450"] for r in rs if r["to_450"]]
            rate = C.median([r["steps_per_s"] for r in rs])
            share = C.median([r["steps_per_s"] / r["raw_env_rate"] for r in rs]) if task == "spread" else math.nan
            lags = [c[4] for r in rs for c in r["curve"][1:]]
            rows.append([
                f"{task} {m}", C.fmt_num(C.median([r["build_s"] for r in rs])),
                C.fmt_num(rate), C.fmt_num(share) if task == "spread" else "-",
                f"{len(reached)}/{len(rs)}", C.fmt_num(C.median([t for t, _ in reached])) if reached else "-",
                C.fmt_num(C.median([s for _, s in reached])) if reached else "-",
                " / ".join(C.fmt_num(t) if t else "-" for t in [r["to_450"] and r["to_450"][0] for r in rs]),
                C.fmt_num(mean([r["curve"][-1][1] for r in rs])), C.fmt_num(max(lags) if lags else 0),
            ])
    C.print_table(["run", "build s", "env steps/s", "/ raw env", "reached 450", "train s to 450", "env steps to 450",
                   "per seed s", "last return", "max lag"], rows,
                  title=f"Medians over {args.seeds} seeds; '/ raw env': each run's rate over the mean of the raw "
                        f"simple_spread random-action rates (8 envs) measured just before and after it: "
                        f"{' / '.join(C.fmt_num(x) for x in raw) or '-'} env steps/s")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
