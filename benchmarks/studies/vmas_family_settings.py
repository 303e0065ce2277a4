"""VMAS navigation at 1,024 worlds: PPO with the vmas task family's settings against PPO's Box defaults, side by side.

    .venv/bin/python benchmarks/studies/vmas_family_settings.py [--worlds 1024] [--env-steps 409600] [--seed 1]

Both sides are composed from the config groups, on BenchMARL's navigation task (conf/task/vmas/navigation.yaml,
3 agents), with `env_runners.num_envs_per_env_runner` set to --worlds:

* family: `algorithm=ppo task=vmas/navigation` (conf/task/vmas/_family.yaml's on-policy block: every world's
  10-step fragment per update, 16 minibatches x 4 epochs, a 128x128 tanh MLP, lr 5e-4, GAE lambda 0.95);
* defaults: the same task with PPO's class defaults as `marl train --algo PPO --env vmas.navigation` gets them
  (the Box `auto` values: RLlib's Pendulum example, 256x256 relu, lambda 0.1, 6 epochs of 128-row minibatches;
  a 4,096-row train batch, the fragment shortened to 43 steps so a round brings one world-fragment of rows).

Both are built in one process and trained one train() call each in turn until each has sampled --env-steps, so
machine load hits them alike. Reported: each side's env steps/s over its own train() time (sampling and
learning), their ratio, and each side's training return (episode_return_mean, summed over the agents) at equal
env steps: the last iteration at or before each checkpoint in which episodes ended. The machine is shared: read the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

from marl.config.compose import compose

TASK = "vmas/navigation"


def sides(worlds: int, seed: int) -> dict[str, list[str]]:
    env_config = compose(None, ["algorithm=ppo", f"task={TASK}"]).data["environment"]["env_config"]
    common = [f"env_runners.num_envs_per_env_runner={worlds}", f"debugging.seed={seed}", "loggers.tensorboard=false"]
    return {
        "family": ["algorithm=ppo", f"task={TASK}", *common],
        "defaults": ["algo=PPO", "environment.env=vmas.navigation",
                     "environment.env_config=" + json.dumps(env_config), *common],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=1024)
    parser.add_argument("--env-steps", type=int, default=409_600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the curves and figures here")
    args = parser.parse_args()

    algos, curves, seconds = {}, {}, {}
    for name, items in sides(args.worlds, args.seed).items():
        config = compose(None, items, name=name).config(validate=True)
        algos[name] = config.build()
        curves[name], seconds[name] = [], 0.0
        t = algos[name].config.training_cfg
        print(f"{name}: train_batch_size {t.train_batch_size}, minibatch {t.minibatch_size}, epochs {t.num_epochs}, "
              f"model {t.model}, gae_lambda {t.gae_lambda}", flush=True)
    load_start = os.getloadavg()[0]
    while any(not curves[n] or curves[n][-1][0] < args.env_steps for n in algos):
        for name, algo in algos.items():
            if curves[name] and curves[name][-1][0] >= args.env_steps:
                continue
            start = time.perf_counter()
            result = algo.train()
            seconds[name] += time.perf_counter() - start
            curves[name].append((result["env_steps_total"], result.get("episode_return_mean", float("nan"))))
            print(f"{name}: {result['env_steps_total']:>8} env steps, return {curves[name][-1][1]:7.2f}, "
                  f"{result['env_steps_total'] / seconds[name]:7.0f} env steps/s", flush=True)
    for algo in algos.values():
        algo.stop()

    rate = {n: curves[n][-1][0] / seconds[n] for n in algos}
    step = max(curves["family"][0][0], curves["defaults"][0][0])
    checkpoints = list(range(step, args.env_steps + 1, step))

    def at(name, steps):  # iterations in which no episode ended have no return: the last one that has
        done = [r for s, r in curves[name] if s <= steps and r == r]
        return done[-1] if done else float("nan")

    title = (f"VMAS navigation, {args.worlds} worlds, seed {args.seed}, load average (1 min) {load_start:.1f} -> "
             f"{os.getloadavg()[0]:.1f}")
    C.print_table(["side", "env steps", "train() s", "env steps/s", "ratio to defaults"],
                  [[n, curves[n][-1][0], f"{seconds[n]:.0f}", f"{rate[n]:.0f}", f"{rate[n] / rate['defaults']:.2f}"]
                   for n in algos], title=title)
    C.print_table(["env steps", "return: family", "return: defaults"],
                  [[c, f"{at('family', c):.2f}", f"{at('defaults', c):.2f}"] for c in checkpoints],
                  title="training return (episode_return_mean, the last iteration at or before each point)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"worlds": args.worlds, "seed": args.seed, "rate": rate, "curves": curves,
                                               "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main()
