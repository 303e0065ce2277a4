"""Per-agent-step cost of the batched path from 3 to 1,000 agents per world, next to the env alone.

    .venv/bin/python benchmarks/speed/agent_scaling.py [--agents 3 30 100 300 1000] [--rows 6144] [--seconds 3]

VMAS's own many-agent scenarios cannot show this here: their collision checks grow with the square
of the agent count (dispersion: 12 us per agent-step at 3 agents, 223 us at 100, 64 worlds), so the
simulator, not marl, would set the curve. The env here is a swarm whose step costs O(worlds x
agents) tensor work (`marl.envs.swarm.Swarm`: point agents steering to their own goals), written to the
`BatchedEnv` contract, either stacked (`BatchedEnv.stacked`: one [worlds, agents, ...] tensor each
for observations, actions and rewards, the default here) or as per-agent dicts of [worlds, ...]
views (`--no-stacked`, as VMAS hands them out).

Each row keeps worlds x agents (`--rows`, the rows of one forward pass) the same, so every
configuration does the same tensor work per step and what grows with the agent count is only
the per-agent work around it (dict entries, stacking, routing). Two sides, interleaved in chunks:

* env alone: `Swarm.step` with pre-drawn random actions;
* marl: `BatchedEnvRunner.sample()` with PPO's columns (values, log-probs, bootstraps), one
  policy shared by all agents, 64x64 tanh.

Printed: microseconds per agent-step of each side and of marl's own share (marl - env), and that
share relative to the 3-agent row. The machine is shared: read the ratios.
"""

from __future__ import annotations

import argparse
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
import torch

import marl
from marl.envs.batched_families import register_batched_env
from marl.envs.registry import register_env
from marl.envs.swarm import Swarm
from marl.runners.batched_runner import BatchedEnvRunner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, nargs="+", default=[3, 30, 100, 300, 1000])
    ap.add_argument("--rows", type=int, default=6144, help="worlds x agents of every row (default 6144)")
    ap.add_argument("--fragment", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--stacked", action=argparse.BooleanOptionalAction, default=True,
                    help="the swarm hands out [worlds, agents, ...] tensors (BatchedEnv.stacked); --no-stacked: a "
                         "dict of [worlds, ...] tensors per agent (default: stacked)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"agent scaling: {C.machine_line()}")
    rows, base = [], None
    for n in args.agents:
        worlds = max(1, args.rows // n)
        register_batched_env("swarm", lambda cfg, worlds, seed, device, n=n: Swarm(worlds, n, seed=seed or 0,
                                                                                  stacked=args.stacked))
        register_env("swarm", lambda cfg, n=n: Swarm(1, n))  # what config validation probes (spaces)
        cfg = (marl.PPOConfig().environment("swarm")
               .env_runners(num_envs_per_env_runner=worlds, rollout_fragment_length=args.fragment, batched=True)
               .training(train_batch_size=worlds * n * args.fragment, model={"hiddens": [64, 64], "activation": "tanh"})
               .debugging(seed=0))
        cfg.validate()
        runner = BatchedEnvRunner(cfg, 0)
        alone = Swarm(worlds, n, stacked=args.stacked)
        alone.reset()
        pool = [torch.rand(worlds, n, 2) * 2 - 1 for _ in range(4)]
        if not args.stacked:
            pool = [dict(zip(alone.agents, a.unbind(1))) for a in pool]

        def env_side(steps=args.fragment):
            for i in range(steps):
                alone.step(pool[i % 4])
            return steps * worlds * n

        sides = {"env": env_side, "marl": lambda: runner.sample().batch.env_steps * n}
        for fn in sides.values():
            fn()
        spent, done = dict.fromkeys(sides, 0.0), dict.fromkeys(sides, 0)
        while min(spent.values()) < args.seconds:
            for name, fn in sides.items():
                t0 = time.perf_counter()
                done[name] += fn()
                spent[name] += time.perf_counter() - t0
        us = {name: spent[name] / done[name] * 1e6 for name in sides}
        own = us["marl"] - us["env"]
        base = own if base is None else base
        rows.append([n, worlds, f"{us['env']:.3f}", f"{us['marl']:.3f}", f"{own:.3f}", f"{own / base:.2f}"])
        C.flush()
    C.print_table(["agents/world", "worlds", "env us/agent-step", "marl us/agent-step", "marl's own us", "own vs first"],
                  rows, title=f"batched path, {args.rows} rows per step, {'stacked' if args.stacked else 'per-agent'} "
                              "tensors (one run)")
    if args.json:
        C.write_json(args.json, {"benchmark": "agent_scaling", "args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
