"""PPO on CartPole-v1: wall time and env steps to a mean episode return of 450, in-process.

    .venv/bin/python benchmarks/speed/ppo_cartpole.py [--seeds 3] [--scenario scenarios/cartpole_ppo.yaml]

For each seed s in 0..N-1: `cfg = marl.load_scenario(...)`, `cfg.debugging(seed=s)`,
`algo = cfg.build()` (timed: start-up), then `algo.train()` until
`algo.stop_reason(result)` (the scenario stops at return 450 or 100k env
steps). Reports per seed and the median: start-up, training time to the stop
(`time_total_s` of the last result, and wall clock around the train loop),
env steps, whether 450 was reached, and the split of training time between
sampling (`perf/sample_time_s`), learning (`perf/learn_time_s`), weight sync
and the rest, summed over iterations.

There is no same-run baseline here: the RLlib figure printed for reference
was measured separately on a machine like this one (RLlib 2.60, defaults, in-process).
"""

from __future__ import annotations

import argparse
import math
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

T_IMPORT = time.perf_counter()
import marl  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT

TARGET_S = 15.0
TARGET_RETURN = 450.0
RLLIB_REF = "RLlib 2.60, measured separately on a machine like this one: ~106 s and ~36k env steps to 450 (defaults; 100-112 s, 36-44k steps)"


def run_seed(scenario: str, seed: int, overrides: list[str], max_iters: int, verbose: bool) -> dict:
    cfg = marl.load_scenario(scenario, overrides)
    cfg.debugging(seed=seed)
    t0 = time.perf_counter()
    algo = cfg.build()
    build_s = time.perf_counter() - t0

    sums = {"sample": 0.0, "learn": 0.0, "sync_weights": 0.0}
    result: dict = {}
    reason = None
    best = -math.inf
    iters = 0
    t_train = time.perf_counter()
    try:
        while iters < max_iters:
            result = algo.train()
            iters += 1
            for key in sums:
                sums[key] += float(result.get(f"perf/{key}_time_s", 0.0) or 0.0)
            ret = result.get("episode_return_mean", math.nan)
            if ret == ret:
                best = max(best, ret)
            if verbose:
                print(
                    f"    seed {seed} iter {iters:3d}  env_steps {result['env_steps_total']:7d}  "
                    f"return {ret:7.1f}  time {result['time_total_s']:6.2f}s"
                )
            reason = algo.stop_reason(result)
            if reason:
                break
        wall_s = time.perf_counter() - t_train
    finally:
        algo.stop()
    ret = result.get("episode_return_mean", math.nan)
    return {
        "seed": seed,
        "build_s": build_s,
        "train_s": float(result.get("time_total_s", math.nan)),
        "wall_s": wall_s,
        "env_steps": int(result.get("env_steps_total", 0)),
        "iters": iters,
        "final_return": ret,
        "best_return": best,
        "reached": ret == ret and ret >= TARGET_RETURN,
        "reason": reason or f"max_iters {max_iters}",
        **{f"{k}_s": v for k, v in sums.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=1, help="run seeds 0..N-1 (default 1)")
    ap.add_argument("--scenario", default=str(C.REPO_ROOT / "scenarios" / "cartpole_ppo.yaml"))
    ap.add_argument("--max-iters", type=int, default=1000, help="safety cap on train() calls per seed")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every iteration")
    ap.add_argument("overrides", nargs="*", help="scenario overrides, key=value (e.g. training.lr=1e-3)")
    args = ap.parse_args()

    print(f"PPO CartPole benchmark: {C.machine_line()}")
    print(f"scenario {args.scenario} {' '.join(args.overrides)}; import marl {IMPORT_S:.2f} s")
    C.flush()

    runs = []
    for seed in range(args.seeds):
        r = run_seed(args.scenario, seed, args.overrides, args.max_iters, args.verbose)
        runs.append(r)
        print(
            f"  seed {seed}: build {r['build_s']:.2f} s, train {r['train_s']:.2f} s (wall {r['wall_s']:.2f} s), "
            f"{r['env_steps']} env steps, {r['iters']} iters, stop: {r['reason']}"
        )
        C.flush()

    def row(label, vals):
        return [
            label,
            f"{vals['build_s']:.2f}",
            f"{vals['train_s']:.2f}",
            f"{vals['wall_s']:.2f}",
            f"{vals['env_steps']:,.0f}",
            f"{vals['final_return']:.1f}",
            vals["reached"],
        ]

    rows = [row(f"seed {r['seed']}", {**r, "reached": "yes" if r["reached"] else "NO"}) for r in runs]
    keys = ["build_s", "train_s", "wall_s", "env_steps", "final_return"]
    med = {k: C.median([r[k] for r in runs]) for k in keys}
    n_reached = sum(r["reached"] for r in runs)
    med["reached"] = f"{n_reached}/{len(runs)}"
    med_row = row(f"median of {len(runs)}", med)
    if len(runs) > 1:
        med_row[1] += " (warm)"
    rows.append(med_row)
    C.print_table(
        ["run", "start-up (build) s", "train time_total_s", "train wall s", "env steps", "final return", "reached 450"],
        rows,
        title="PPO CartPole-v1 to mean episode return >= 450 (in-process)",
    )

    # Where the training time goes, summed over iterations.
    split_rows = []
    for r in runs:
        other = r["train_s"] - r["sample_s"] - r["learn_s"] - r["sync_weights_s"]
        t = r["train_s"]
        split_rows.append(
            [
                f"seed {r['seed']}",
                f"{r['sample_s']:.2f} ({100 * r['sample_s'] / t:.0f} %)",
                f"{r['learn_s']:.2f} ({100 * r['learn_s'] / t:.0f} %)",
                f"{r['sync_weights_s']:.3f}",
                f"{other:.2f}",
                f"{r['env_steps'] / r['sample_s']:,.0f}" if r["sample_s"] > 0 else "-",
            ]
        )
    C.print_table(
        ["run", "sampling s", "learning s", "weight sync s", "other s", "env steps/s while sampling"],
        split_rows,
        title="Split of training time (perf/sample_time_s, perf/learn_time_s, perf/sync_weights_time_s summed)",
    )

    cold = runs[0]["build_s"]
    warm = [r["build_s"] for r in runs[1:]]
    warm_s = f"; later builds in the same process {C.median(warm):.2f} s (torch already warm)" if warm else ""
    print(
        f"\nStart-up: import marl {IMPORT_S:.2f} s + first build {cold:.2f} s = {IMPORT_S + cold:.2f} s cold{warm_s}. "
        f"The median row's start-up is the warm figure when --seeds > 1."
    )

    median_train = med["train_s"]
    ok = n_reached == len(runs) and median_train < TARGET_S
    print(
        f"Target: under {TARGET_S:g} s of training to 450 -> median {median_train:.2f} s, "
        f"reached in {n_reached}/{len(runs)} seeds: {'PASS' if ok else 'FAIL'}"
    )
    print(f"Reference (not a same-run baseline): {RLLIB_REF}")


if __name__ == "__main__":
    main()
