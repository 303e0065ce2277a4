"""marl side by side with BenchMARL (TorchRL) on simple_spread and VMAS balance: MAPPO and IPPO, matched settings, alternating runs.

    bash benchmarks/setup_benchmarl.sh                   # once: BenchMARL in its own venv (/work/venvs/benchmarl)
    nice .venv/bin/python benchmarks/compare_benchmarl.py --seeds 3 --json runs/benchmarl.json

Every run is a fresh process: marl's through benchmarks/marl_tasks.py in marl's venv, BenchMARL's
through benchmarks/benchmarl_tasks.py in its venv (BenchMARL is never a marl dependency). Sides:
`marl` (the scenario as it is: in-process, synchronous), `marl overlap` (one runner actor sampling
beside the learner), `marl overlap x2` (two runner actors beside the learner, the envs split between
them: 2 x 4 on simple_spread, 2 x 16 worlds on balance), `BenchMARL` (its SerialEnv: every env in its
one process) and `BenchMARL parallel` (`parallel_collection`: TorchRL's ParallelEnv, one process per
env); every marl side is compared with `BenchMARL`, the faster BenchMARL side here. For each
algorithm and seed the sides run back to back, their order rotating with the seed. Settings on both
sides (scenarios/simple_spread_mappo.yaml and simple_spread_ppo.yaml; benchmarl_tasks.py): PettingZoo
simple_spread_v3, 3 agents, discrete actions, 25 cycles; 8 vectorised envs, 2,048 env steps per
iteration, 5 epochs of 512-row minibatches, lr 1e-3, [128, 128] tanh, parameters shared by the agents;
IPPO is marl's PPO with one shared policy. VMAS balance (`MAPPO balance`, `IPPO balance`; 3 agents,
continuous actions, 100 steps): scenarios/vmas_balance_mappo.yaml on both sides (one VMAS env of 32
worlds, 3,200 env steps per iteration, 4 epochs of 800-row minibatches, lr 5e-4, [128, 128] tanh,
shared parameters; IPPO: the same scenario with PPO), budget `--vmas-env-steps`, raw rate: VMAS
stepped alone with random actions over the same 32 worlds (vmas_rate.py's loop). Measured from outside each process (compare_rllib.py's
machinery): env steps/s including learning (from the build to the last result), process start to the
first result, peak memory (PSS summed over the process tree), and the return at equal env steps
(mean of the per-iteration returns over the last 20 % of the budget, summed over agents on both sides);
and simple_spread's own random-action rate over 8 envs (sampling.py's loop), before and after the runs,
against which the IPPO rows give the share of the raw env rate (overlap target: >= 0.9).
BenchMARL runs with OMP_NUM_THREADS=1 and one torch thread, like marl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import _common as C
from compare_rllib import MARL_PY, Run, fmt, fmt_mb, ratio_row, run_process

HERE = Path(__file__).resolve().parent
DEFAULT_BENCHMARL_PY = Path(os.environ.get("BENCHMARL_VENV", "/work/venvs/benchmarl")) / "bin" / "python"
# label: (marl task, BenchMARL task, env)
ALGOS = {"MAPPO": ("mappo_spread", "mappo_spread", "spread"), "IPPO": ("ppo_spread", "ippo_spread", "spread"),
         "MAPPO balance": ("mappo_balance", "mappo_balance", "balance"),
         "IPPO balance": ("ppo_balance", "ippo_balance", "balance")}
TARGETS = {"steps_per_s": 5.0, "startup": 2.0, "memory": 4 / 3}


def raw_env_rate(seconds: float) -> float:
    """simple_spread's random-action rate over 8 envs made by marl.make_env (sampling.py's loop), in this process."""
    from sampling import SPREAD_CONFIG, RandomLoop

    loop = RandomLoop("mpe2.simple_spread_v3", SPREAD_CONFIG, 8, inline=False, seed=0)
    steps, elapsed = C.run_for(seconds, lambda: loop.run(64))
    return steps / elapsed


def raw_vmas_rate(seconds: float) -> float:
    """VMAS balance stepped alone with random actions, 32 worlds (vmas_rate.py's loop), in this process."""
    from vmas_rate import VmasAlone

    alone = VmasAlone("balance", {"n_agents": 3, "max_steps": 100}, 32, seed=0)
    steps, elapsed = C.run_for(seconds, lambda: alone.run(100))
    return steps / elapsed


def raw_pettingzoo_rate(seconds: float) -> float:
    """The same loop over simple_spread as PettingZoo's `parallel_env()` builds it, guard wrappers kept (as
    BenchMARL steps it); marl.make_env takes them out (`marl.envs.pettingzoo.without_guard_wrappers`)."""
    import numpy as np
    from mpe2 import simple_spread_v3
    from sampling import SPREAD_CONFIG

    envs = [simple_spread_v3.parallel_env(**SPREAD_CONFIG) for _ in range(8)]
    for k, env in enumerate(envs):
        env.reset(seed=k)
    pool = np.random.default_rng(0).integers(0, 5, size=(4096, 3)).tolist()
    i = [0]

    def lockstep(steps: int) -> int:
        for _ in range(steps):
            i[0] = (i[0] + 1) % len(pool)
            actions = pool[i[0]]
            for env in envs:
                env.step({a: actions[j] for j, a in enumerate(env.agents)})
                if not env.agents:
                    env.reset()
        return steps * len(envs)

    steps, elapsed = C.run_for(seconds, lambda: lockstep(64))
    return steps / elapsed


RAW_RATES = {"spread": raw_env_rate, "balance": raw_vmas_rate}
_MARL_LIMITS = ["--max-train-s", "3600"]
# side -> its script's arguments for an env ("spread" or "balance"), besides the budget
SIDES = {
    "marl": lambda env: ["--runners", "0", *_MARL_LIMITS],  # in-process, synchronous (the default)
    "marl overlap": lambda env: ["--overlap", *_MARL_LIMITS],  # one runner actor beside the learner
    # two runner actors beside the learner, the scenario's envs split between them (8 = 2 x 4 on simple_spread)
    "marl overlap x2": lambda env: ["--overlap", "--runners", "2", "--envs-per-runner", "4" if env == "spread" else "16",
                                    *_MARL_LIMITS],
    "BenchMARL": lambda env: [],  # its SerialEnv: the envs in its one process
    "BenchMARL parallel": lambda env: ["--parallel"],  # experiment.parallel_collection: TorchRL's ParallelEnv
}
MARL_SIDES = [s for s in SIDES if s.startswith("marl")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algos", default=",".join(ALGOS), help=f"comma-separated, of: {', '.join(ALGOS)}")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--env-steps", type=int, default=20_480, help="env-step budget of every simple_spread run (10 iterations)")
    ap.add_argument("--vmas-env-steps", type=int, default=32_000, help="env-step budget of every VMAS balance run (10 iterations)")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of: {', '.join(SIDES)}")
    ap.add_argument("--raw-seconds", type=float, default=5.0, help="seconds of the raw env-rate loop, before and after")
    ap.add_argument("--benchmarl-python", default=str(DEFAULT_BENCHMARL_PY))
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--merge", action="append", default=[], metavar="JSON", help="add an earlier --json file's runs")
    args = ap.parse_args()
    bm_py = Path(args.benchmarl_python)
    sides_wanted = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown_sides = [s for s in sides_wanted if s not in SIDES]
    if unknown_sides:
        sys.exit(f"unknown --sides {unknown_sides}; known: {', '.join(SIDES)}")
    if any(s.startswith("BenchMARL") for s in sides_wanted) and not bm_py.exists():
        sys.exit(f"BenchMARL's python '{bm_py}' does not exist: run `bash benchmarks/setup_benchmarl.sh` first")
    if args.log_dir:
        log_dir = Path(args.log_dir)
    else:
        import tempfile

        log_dir = Path(tempfile.mkdtemp(prefix="compare_benchmarl-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = "1"
    # marl's runs (and their Ray workers, which inherit the environment) import the marl of this checkout,
    # not whichever one the venv has installed.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    print(f"compare_benchmarl: {C.machine_line()}; logs in {log_dir}", flush=True)

    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    unknown = [a for a in algos if a not in ALGOS]
    if unknown:
        sys.exit(f"unknown --algos {unknown}; known: {', '.join(ALGOS)}")
    env_steps = {"spread": args.env_steps, "balance": args.vmas_env_steps}
    envs = sorted({ALGOS[a][2] for a in algos})
    runs: list[Run] = [Run(**r) for path in args.merge for r in json.loads(Path(path).read_text())["runs"]]
    t_all = time.time()
    raw = {env: [RAW_RATES[env](args.raw_seconds)] for env in envs}  # each env's own random-action rate, before and after
    print("  raw env rates (random actions): " + ", ".join(f"{e} {r[0]:,.0f} env steps/s" for e, r in raw.items()), flush=True)
    if "spread" in envs:
        print(f"  simple_spread as PettingZoo's parallel_env() builds it (guard wrappers kept, as BenchMARL steps it): "
              f"{raw_pettingzoo_rate(args.raw_seconds):,.0f} env steps/s", flush=True)
    for seed in range(args.seeds):  # seed-major: an interrupted invocation still has whole seeds of every algorithm
        for algo in algos:
            marl_task, bm_task, env = ALGOS[algo]
            budget = ["--max-env-steps", str(env_steps[env])]
            sides = [(side, bm_py if side.startswith("BenchMARL") else MARL_PY,
                      "benchmarl_tasks.py" if side.startswith("BenchMARL") else "marl_tasks.py",
                      bm_task if side.startswith("BenchMARL") else marl_task, [*SIDES[side](env), *budget])
                     for side in sides_wanted]
            sides = sides[seed % len(sides):] + sides[: seed % len(sides)]  # rotate the order with the seed
            for side, python, script, task, extra in sides:
                print(f"  {algo} seed {seed}: {side} ...", end=" ", flush=True)
                run = run_process(side, python, script, algo, task, seed, extra, log_dir, False)
                runs.append(run)
                print("FAILED, see " + run.log if run.failed else
                      f"{run.env_steps():,} env steps, {run.steps_per_s():,.0f}/s, first result {run.startup_s():.1f} s, "
                      f"peak {fmt_mb(run.peak_pss)}, return at end {fmt(run.return_at_end(env_steps[env]))}", flush=True)
    for env in envs:
        raw[env].append(RAW_RATES[env](args.raw_seconds))

    def budget_of(task: str) -> int:
        return env_steps[ALGOS[task][2]]

    rows = []
    for r in runs:
        if r.failed:
            rows.append([f"{r.task} seed {r.seed}", r.side, f"{r.load:.1f}", "failed", "", "", "", "", ""])
            continue
        rows.append([f"{r.task} seed {r.seed}", r.side, f"{r.load:.1f}", fmt(r.startup_s(), " s"), f"{r.env_steps():,}",
                     fmt(r.steps_per_s()), fmt(r.return_at_end(budget_of(r.task))), fmt(r.iters[-1]["return"]),
                     f"{fmt_mb(r.peak_pss)} / {r.peak_procs}"])
    C.print_table(["run", "side", "load", "first result", "env steps", "env steps/s", "return (last 20 %)",
                   "last return", "peak PSS / procs"], rows, title="Runs (times from process start)")

    table = []
    for algo in ALGOS:
        bm = [r for r in runs if r.task == algo and r.side == "BenchMARL" and not r.failed]
        for side in MARL_SIDES:
            ours = [r for r in runs if r.task == algo and r.side == side and not r.failed]
            if not ours or not bm:
                continue
            label = f"{algo} ({side})"
            table.append(ratio_row(f"{label}: env steps/s incl. learning", [r.steps_per_s() for r in ours],
                                   [r.steps_per_s() for r in bm], "", "higher", TARGETS["steps_per_s"]))
            table.append(ratio_row(f"{label}: process start to first result", [r.startup_s() for r in ours],
                                   [r.startup_s() for r in bm], " s", "lower", TARGETS["startup"]))
            table.append(ratio_row(f"{label}: peak memory (PSS, process tree)", [r.peak_pss / 2**20 for r in ours],
                                   [r.peak_pss / 2**20 for r in bm], " MB", "lower", TARGETS["memory"]))
            m_ret = [r.return_at_end(budget_of(algo)) for r in ours]
            b_ret = [r.return_at_end(budget_of(algo)) for r in bm]
            table.append([f"{label}: return at {budget_of(algo):,} env steps (last 20 %, median; seeds)", fmt(C.median(m_ret)),
                          fmt(C.median(b_ret)), f"{C.spread(m_ret)} vs {C.spread(b_ret)}", "not worse",
                          "met" if C.median(m_ret) >= min(b_ret) else "MISSED"])
    C.print_table(["figure (median over seeds)", "marl", "BenchMARL", "marl better by", "target", "verdict"], table,
                  title="marl vs BenchMARL (times and memory: BenchMARL / marl; throughput: marl / BenchMARL)")
    rows = []
    for algo in ALGOS:
        env = ALGOS[algo][2]
        for side in SIDES:
            rates = [r.steps_per_s() for r in runs if r.task == algo and r.side == side and not r.failed]
            if rates and env in raw:
                rows.append([f"{algo} ({side})", fmt(C.median(rates)), fmt(C.median(rates) / (sum(raw[env]) / len(raw[env]))),
                             ">= 0.9" if algo == "IPPO" and side.startswith("marl overlap") else ""])
    C.print_table(["env steps/s incl. learning (median)", "rate", "/ raw env rate", "target"], rows,
                  title="Against each env's own random-action rate, measured in this invocation (before / after): "
                        + "; ".join(f"{e} {' / '.join(f'{x:,.0f}' for x in r)} env steps/s" for e, r in raw.items())
                        + " (simple_spread: 8 envs; balance: 32 worlds)")
    print(f"\ntotal {time.time() - t_all:.0f} s; load avg now {os.getloadavg()[0]:.2f}")
    if args.json:
        data = [{**{k: getattr(r, k) for k in ("side", "task", "seed", "t_spawn", "t_end", "rc", "peak_pss", "peak_rss",
                                                  "peak_procs", "log", "load")}, "events": r.events} for r in runs]
        Path(args.json).write_text(json.dumps({"machine": C.machine_line(), "args": vars(args), "runs": data,
                                               "table": table, "raw_env_rate": raw}, indent=1))


if __name__ == "__main__":
    main()
