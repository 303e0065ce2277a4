"""Sampling a JaxMARL env: the compiled rollout (one jitted scan per fragment) against one call per step, interleaved.

    .venv/bin/python benchmarks/speed/compiled_rollout.py [--settings 16x128 1024x32] [--repeats 20]

Two `BatchedEnvRunner`s on `jaxmarl.MPE_simple_spread_v3` with PPO's columns (64x64 tanh, one policy
shared by the 3 agents), one with `env_runners.compiled_rollout: true`, one with `false`, in one
process; `runner.sample()` (a whole fragment: acting, env steps, the fragment's columns and episode
statistics, the cut's bootstrap) timed alternately, `--repeats` times each after the first fragment
(which compiles: reported apart, wall-clock). Reported: medians per fragment and per world-step
(wall-clock and CPU of this process), the ratio step-by-step / compiled. The machine is shared with
other jobs: the ratios (same process, interleaved) are the figures to read.
"""

from __future__ import annotations

import argparse
import statistics
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.runner_choice import runner_class


def runner(worlds: int, fragment: int, compiled: bool) -> BatchedEnvRunner:
    cfg = (marl.PPOConfig().environment("jaxmarl.MPE_simple_spread_v3")
           .env_runners(num_envs_per_env_runner=worlds, rollout_fragment_length=fragment, compiled_rollout=compiled)
           .training(train_batch_size=worlds * fragment * 3, minibatch_size=worlds * fragment * 3 // 4,
                     model={"hiddens": [64, 64], "activation": "tanh"})
           .debugging(seed=0))
    return runner_class(cfg)(cfg, 0)


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["16x128", "1024x32"], help="worlds x fragment length")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"compiled_rollout: {C.machine_line()}", flush=True)
    rows = []
    for setting in args.settings:
        worlds, fragment = (int(x) for x in setting.split("x"))
        sides = {"compiled": runner(worlds, fragment, True), "step by step": runner(worlds, fragment, False)}
        first = {name: timed(r.sample)[0] for name, r in sides.items()}
        times = {name: [] for name in sides}
        for _ in range(args.repeats):
            for name, r in sides.items():
                times[name].append(timed(r.sample))
        med = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}
        for name in sides:
            wall, cpu = med[name]
            steps = worlds * fragment
            rows.append([setting, name, f"{wall * 1e3:.1f} ms", f"{cpu * 1e3:.1f} ms",
                         f"{wall / fragment * 1e6:.0f} us", f"{steps / wall:,.0f}",
                         f"{med['step by step'][0] / wall:.2f}", f"{med['step by step'][1] / cpu:.2f}",
                         f"{first[name]:.2f} s"])
            print(rows[-1], flush=True)
    C.print_table(["worlds x steps", "path", "per fragment (wall)", "(CPU)", "per step of all worlds", "env steps/s",
                   "speed-up (wall)", "(CPU)", "first fragment (compile)"], rows,
                  title=f"runner.sample() on jaxmarl.MPE_simple_spread_v3, medians of {args.repeats} interleaved")


if __name__ == "__main__":
    main()
