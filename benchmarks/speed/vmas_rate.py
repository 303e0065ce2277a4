"""Env steps/s of marl sampling a VMAS scenario, next to VMAS stepped alone, in the same run.

    .venv/bin/python benchmarks/speed/vmas_rate.py [--scenario balance] [--envs 32 256] [--seconds 2] [--repeats 3]

Three sides, measured interleaved in alternating chunks of equal work (one
`rollout_fragment_length` of lockstep steps), the medians over repeats shown:

* VMAS alone: one `vmas.make_env(num_envs=K)` stepped with pre-generated random
  action tensors; worlds that end are reset (all at once with one `reset` when all ended, else
  `reset_at` each), then one observation pass for all worlds (the cheap way; `reset_at` returning
  observations recomputes them per world);
* marl (batched): `BatchedEnvRunner.sample()` (what `marl train` uses for `vmas.*`):
  one VMAS env of K worlds as tensors, the algorithm's columns (MAPPO: values, log-probs,
  global state), one policy shared by the agents;
* marl (dict): `VectorEnvRunner.sample()`, the dict-API runner over the same K worlds
  (`env_runners.batched: false`; what `vmas.*` used before the batched path);
* marl (K copies): the plain `EnvRunner` over K single-world VMAS envs (what a
  runner would do without the batched path), for comparison (only up to --copies-max worlds).

An env step is one step of one world. The machine is shared with other jobs: the
ratios (same process, interleaved) are the figures to read, not the absolute rates.
"""

from __future__ import annotations

import argparse
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
import torch

import marl
from marl.modules import numpy_acting
from marl.runners import EnvRunner
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.vector_env_runner import VectorEnvRunner


def make_config(scenario: str, env_config: dict, num_envs: int, fragment: int, seed: int, algo: str = "MAPPO",
                batched="auto", device: str = "cpu", model: dict | None = None):
    cfg = (
        getattr(marl, f"{algo}Config")()
        .environment(f"vmas.{scenario}", env_config=dict(env_config))
        .env_runners(num_envs_per_env_runner=num_envs, rollout_fragment_length=fragment, batched=batched,
                     device=device if batched is not False else "cpu")
        .multi_agent(policies=["shared"], policy_mapping_fn=lambda agent, episode: "shared")
        .debugging(seed=seed)
    )
    if model:
        cfg.training(model=model)
    cfg.validate()
    return cfg


class VmasAlone:
    """One VMAS env of `num_envs` worlds, random actions from a pre-generated pool."""

    POOL = 64

    def __init__(self, scenario: str, env_config: dict, num_envs: int, seed: int, device: str = "cpu"):
        import vmas

        config = dict(env_config)
        max_steps = config.pop("max_steps", 100)
        self.env = vmas.make_env(scenario, num_envs=num_envs, device=device, continuous_actions=True,
                                 max_steps=max_steps, seed=seed, terminated_truncated=True, **config)
        self.env.reset()
        self.pool = [self.env.get_random_actions() for _ in range(self.POOL)]
        self.i = 0
        self.num_envs = num_envs

    def run(self, steps: int) -> int:
        env = self.env
        for _ in range(steps):
            self.i = (self.i + 1) % self.POOL
            _obs, _rew, terminated, truncated, _info = env.step(self.pool[self.i])
            done = (terminated | truncated).nonzero().flatten().tolist()
            if len(done) == self.num_envs:  # all ended together (max_steps): one reset call (as marl does)
                env.reset(return_observations=False)
            else:  # reset the ended worlds, then one observation pass for all (as marl does)
                for k in done:
                    env.reset_at(k, return_observations=False)
            if done:
                env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)
        return steps * self.num_envs


def unfolded(call):
    """`call()` with the NumPy acting pass's tanh left unfolded (its row threshold out of reach)."""
    small, numpy_acting.SMALL = numpy_acting.SMALL, 1 << 62
    try:
        return call()
    finally:
        numpy_acting.SMALL = small


def model_note(cfg) -> str:
    """`, model [64, 64] tanh`: the policies' resolved model (the acting pass's size)."""
    model = cfg.as_built().training_cfg.model
    return f", model {model.get('hiddens')} {model.get('activation', '')}".rstrip()


def measure(sides: dict, fragment: int, seconds: float) -> dict:
    """Env steps/s of each side, in alternating chunks until each side ran ~`seconds`."""
    time_s = dict.fromkeys(sides, 0.0)
    steps = dict.fromkeys(sides, 0)
    order = list(sides)
    while min(time_s.values()) < seconds:
        for name in order:
            t0 = time.perf_counter()
            steps[name] += sides[name]()
            time_s[name] += time.perf_counter() - t0
        order.reverse()
    return {name: steps[name] / time_s[name] for name in sides}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default="balance")
    ap.add_argument("--agents", type=int, default=3, help="n_agents of the scenario (default 3)")
    ap.add_argument("--envs", type=int, nargs="+", default=[32, 256], help="worlds per runner (default 32 256)")
    ap.add_argument("--fragment", type=int, default=50, help="rollout_fragment_length (default 50)")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per side per repeat (default 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--copies-max", type=int, default=32,
                    help="measure the K single-world copies side only up to this K (it is ~20x slower; default 32)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--algo", default="MAPPO", help="whose sample columns the runners record (default MAPPO)")
    ap.add_argument("--dict-max", type=int, default=1024,
                    help="measure the dict-API runner over the same worlds only up to this K (default 1024)")
    ap.add_argument("--device", default="cpu", help="torch device of VMAS and the batched runner (cpu, cuda); the dict "
                    "and copies sides stay on the CPU (set --dict-max 0 --copies-max 0 to leave them out)")
    ap.add_argument("--unfolded", action="store_true",
                    help="add a side: the batched runner acting with np.tanh as it is, rather than folded into a "
                         "sigmoid (marl.modules.numpy_acting: what the fold saves, side by side)")
    ap.add_argument("--hiddens", type=int, nargs="+", help="the policies' hidden layers (default: the algorithm's own model "
                    "default: PPO's is [256, 256] relu for Box actions, [64, 64] tanh for discrete); the acting pass over "
                    "3 x K rows is most of marl's cost per step beside VMAS's")
    ap.add_argument("--activation", default="tanh", help="with --hiddens: their activation (default tanh)")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    env_config = {"n_agents": args.agents, "max_steps": 100}

    print(f"VMAS rate benchmark: {C.machine_line()}")
    print(f"scenario vmas.{args.scenario} {env_config}, fragment {args.fragment}, {args.repeats} repeats x "
          f"{args.seconds:g} s per side, sides interleaved chunk by chunk; env step = one world's step")
    rows = []
    for num_envs in args.envs:
        model = {"hiddens": args.hiddens, "activation": args.activation} if args.hiddens else None
        cfg = make_config(args.scenario, env_config, num_envs, args.fragment, args.seed, args.algo, device=args.device, model=model)
        batched = BatchedEnvRunner(cfg, 0)
        alone = VmasAlone(args.scenario, env_config, num_envs, args.seed, args.device)
        sides = {
            "vmas": lambda a=alone: a.run(args.fragment),
            "batched": lambda r=batched: r.sample().batch.env_steps,
        }
        if args.unfolded:
            sides["unfolded"] = lambda r=BatchedEnvRunner(cfg, 0): unfolded(r.sample).batch.env_steps
        if num_envs <= args.dict_max:
            dict_runner = VectorEnvRunner(make_config(args.scenario, env_config, num_envs, args.fragment, args.seed,
                                                      args.algo, batched=False), 0)
            sides["dict"] = lambda r=dict_runner: r.sample().batch.env_steps
        if num_envs <= args.copies_max:
            copies = EnvRunner(make_config(args.scenario, env_config, num_envs, args.fragment, args.seed, args.algo), 0)
            # K single-world VMAS envs, stepped one after the other
            sides["copies"] = lambda r=copies: r.sample().batch.env_steps
        for fn in sides.values():  # warm-up
            fn()
        results = [measure(sides, args.fragment, args.seconds) for _ in range(args.repeats)]
        med = {name: C.median([r[name] for r in results]) for name in sides}
        ratio = C.median([r["batched"] / r["vmas"] for r in results])
        row = [num_envs, C.fmt_num(med["vmas"]), C.fmt_num(med["batched"]), f"{ratio:.3f}"]
        if "dict" in med:
            row += [C.fmt_num(med["dict"]), f"{C.median([r['dict'] / r['vmas'] for r in results]):.3f}"]
        else:
            row += ["-", "-"]
        if "copies" in med:
            row += [C.fmt_num(med["copies"]), f"{C.median([r['batched'] / r['copies'] for r in results]):.2f}"]
        else:
            row += ["-", "-"]
        if "unfolded" in med:
            row += [C.fmt_num(med["unfolded"]), f"{C.median([r['batched'] / r['unfolded'] for r in results]):.3f}"]
        rows.append(row)
        C.flush()
    C.print_table(
        ["worlds", "VMAS alone steps/s", "marl batched steps/s", "batched/VMAS", "marl dict steps/s", "dict/VMAS",
         "marl K copies steps/s", "batched/copies"] + (["marl batched, tanh unfolded", "folded/unfolded"]
                                                         if args.unfolded else []),
        rows, title=f"vmas.{args.scenario} ({args.algo}'s columns{model_note(cfg)}) on {args.device}: env steps/s (medians)",
    )
    if args.json:
        C.write_json(args.json, {"benchmark": "vmas_rate", "args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
