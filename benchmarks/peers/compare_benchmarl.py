"""marl side by side with BenchMARL (TorchRL) on simple_spread and VMAS (balance, navigation): MAPPO and IPPO, matched settings, alternating runs.

    bash benchmarks/peers/setup_benchmarl.sh                   # once: BenchMARL in its own venv (/work/venvs/benchmarl)
    nice .venv/bin/python benchmarks/peers/compare_benchmarl.py --seeds 3 --json runs/benchmarl.json
    nice .venv/bin/python benchmarks/peers/compare_benchmarl.py --tasks vmas --vmas-worlds 32 256 --sides marl,BenchMARL

Every run is a fresh process: marl's through benchmarks/peers/marl_tasks.py in marl's venv, BenchMARL's
through benchmarks/peers/benchmarl_tasks.py in its venv (BenchMARL is never a marl dependency). Sides:
`marl` (the scenario as it is: in-process, synchronous; VMAS on the batched path, BatchedEnvRunner),
`marl overlap` (one runner actor sampling beside the learner), `marl overlap x2` (two runner actors
beside the learner, the envs split between them: 2 x 4 on simple_spread, 2 x half the worlds on
VMAS), `BenchMARL` (its SerialEnv: every env in its one process; VMAS: TorchRL's VmasEnv, one env of
all the worlds) and `BenchMARL parallel` (`parallel_collection`: TorchRL's ParallelEnv, one process
per env); every marl side is compared with `BenchMARL`, the faster BenchMARL side here. For each
task and seed the sides run back to back, their order rotating with the seed. Settings on both
sides (scenarios/simple_spread_mappo.yaml and simple_spread_ppo.yaml; benchmarl_tasks.py): PettingZoo
simple_spread_v3, 3 agents, discrete actions, 25 cycles; 8 vectorised envs, 2,048 env steps per
iteration, 5 epochs of 512-row minibatches, lr 1e-3, [128, 128] tanh, parameters shared by the agents;
IPPO is marl's PPO with one shared policy. VMAS (`MAPPO balance`, `IPPO balance`: 3 agents,
scenarios/vmas_balance_mappo.yaml; `MAPPO navigation`, `IPPO navigation`: 4 agents,
scenarios/vmas_navigation_mappo.yaml, BenchMARL's navigation kwargs; continuous actions, 100 steps):
one VMAS env of 32 worlds, 3,200 env steps per iteration, 4 epochs of 800-row minibatches, lr 5e-4,
[128, 128] tanh, shared parameters; IPPO: the same scenario with PPO. `--vmas-worlds 32 256` runs
every VMAS task at each world count, on both sides alike: W x 100 env steps per iteration and
minibatches of 800 x W / 32 rows (the same number of minibatches per epoch); budget
`--vmas-env-steps` (10 iterations by default). Raw rate: VMAS stepped alone with random actions over
the same worlds (vmas_rate.py's loop). Measured from outside each process (compare_rllib.py's
machinery): env steps/s including learning (from the build to the last result), process start to the
first result, peak memory (PSS summed over the process tree), and the return at equal env steps
(mean of the per-iteration returns over the last 20 % of the budget, summed over agents on both sides);
and each env's own random-action rate (simple_spread: 8 envs, sampling.py's loop), before and after
the runs, against which the rows give the share of the raw env rate (IPPO overlap target: >= 0.9).
BenchMARL runs with OMP_NUM_THREADS=1 and one torch thread, like marl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
from compare_rllib import MARL_PY, Run, fmt, fmt_mb, ratio_row, run_process

HERE = Path(__file__).resolve().parent
DEFAULT_BENCHMARL_PY = Path(os.environ.get("BENCHMARL_VENV", "/work/venvs/benchmarl")) / "bin" / "python"
# algorithm: (marl task, BenchMARL task, env)
ALGOS = {"MAPPO": ("mappo_spread", "mappo_spread", "spread"), "IPPO": ("ppo_spread", "ippo_spread", "spread"),
         "MAPPO balance": ("mappo_balance", "mappo_balance", "balance"),
         "IPPO balance": ("ppo_balance", "ippo_balance", "balance"),
         "MAPPO navigation": ("mappo_navigation", "mappo_navigation", "navigation"),
         "IPPO navigation": ("ppo_navigation", "ippo_navigation", "navigation")}
# VMAS env: the scenario whose env_config both sides and the raw-rate loop use
VMAS_SCENARIOS = {"balance": HERE.parents[1] / "scenarios" / "vmas_balance_mappo.yaml",
                  "navigation": HERE.parents[1] / "scenarios" / "vmas_navigation_mappo.yaml"}
VMAS_WORLDS = 32  # the scenarios' own worlds: a run label without a world count (earlier --json files) means these
ENV_GROUPS = {"vmas": list(VMAS_SCENARIOS)}  # --tasks names besides the envs themselves
TARGETS = {"steps_per_s": 5.0, "startup": 2.0, "memory": 4 / 3}


def case_label(algo: str, worlds: int | None) -> str:
    """A run's label: the algorithm, and for VMAS its world count ("MAPPO navigation, 256 worlds")."""
    return algo if worlds is None else f"{algo}, {worlds} worlds"


def case_of(label: str) -> tuple[str, int | None]:
    """(algorithm, worlds) of a label; labels of runs from before --vmas-worlds ("MAPPO balance") are 32 worlds."""
    algo, _, worlds = label.partition(", ")
    if ALGOS[algo][2] == "spread":
        return algo, None
    return algo, int(worlds.split()[0]) if worlds else VMAS_WORLDS


def env_key(env: str, worlds: int | None) -> str:
    return env if worlds is None else f"{env}, {worlds} worlds"


def raw_env_rate(seconds: float) -> float:
    """simple_spread's random-action rate over 8 envs made by marl.make_env (sampling.py's loop), in this process."""
    from sampling import SPREAD_CONFIG, RandomLoop

    loop = RandomLoop("mpe2.simple_spread_v3", SPREAD_CONFIG, 8, inline=False, seed=0)
    steps, elapsed = C.run_for(seconds, lambda: loop.run(64))
    return steps / elapsed


def raw_vmas_rate(env: str, worlds: int, seconds: float, device: str = "cpu") -> float:
    """A VMAS scenario stepped alone with random actions over `worlds` worlds (vmas_rate.py's loop), in this process;
    the scenario's kwargs are those of its file in scenarios/ (what both sides run)."""
    import yaml
    from vmas_rate import VmasAlone

    env_config = yaml.safe_load(VMAS_SCENARIOS[env].read_text())["environment"]["env_config"]
    alone = VmasAlone(env, env_config, worlds, seed=0, device=device)
    steps, elapsed = C.run_for(seconds, lambda: alone.run(100))
    return steps / elapsed


def raw_rate(env: str, worlds: int | None, seconds: float, device: str = "cpu") -> float:
    return raw_env_rate(seconds) if env == "spread" else raw_vmas_rate(env, worlds, seconds, device)


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


_MARL_LIMITS = ["--max-train-s", "3600"]
# side -> its script's arguments for an env ("spread" or a VMAS env) at `worlds` (None: simple_spread), besides the budget
SIDES = {
    "marl": lambda env, worlds: ["--runners", "0", *_MARL_LIMITS],  # in-process, synchronous (the default)
    "marl overlap": lambda env, worlds: ["--overlap", *_MARL_LIMITS],  # one runner actor beside the learner
    # two runner actors beside the learner, the envs split between them (8 = 2 x 4 on simple_spread)
    "marl overlap x2": lambda env, worlds: ["--overlap", "--runners", "2", "--envs-per-runner",
                                            "4" if worlds is None else str(worlds // 2), *_MARL_LIMITS],
    "BenchMARL": lambda env, worlds: [],  # its SerialEnv: the envs in its one process
    "BenchMARL parallel": lambda env, worlds: ["--parallel"],  # experiment.parallel_collection: TorchRL's ParallelEnv
}
MARL_SIDES = [s for s in SIDES if s.startswith("marl")]


def comma_list(text: str, known, what: str) -> list[str]:
    items = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in items if a not in known]
    if unknown:
        sys.exit(f"unknown {what} {unknown}; known: {', '.join(known)}")
    return items


def vmas_budgets(args) -> dict[int, int]:
    """worlds -> env-step budget of every VMAS run at that count: --vmas-env-steps (one value for all counts, or one
    per count) or 10 iterations of worlds x 100 env steps."""
    steps = args.vmas_env_steps or [10 * w * 100 for w in args.vmas_worlds]
    if len(steps) == 1:
        steps = steps * len(args.vmas_worlds)
    if len(steps) != len(args.vmas_worlds):
        sys.exit(f"--vmas-env-steps: give one value, or one per --vmas-worlds entry ({len(args.vmas_worlds)})")
    return dict(zip(args.vmas_worlds, steps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--algos", default=",".join(ALGOS), help=f"comma-separated, of: {', '.join(ALGOS)}")
    ap.add_argument("--tasks", default=None, help="comma-separated envs to keep from --algos: spread, balance, "
                                                  "navigation, or vmas (balance and navigation)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--env-steps", type=int, default=20_480, help="env-step budget of every simple_spread run (10 iterations)")
    ap.add_argument("--vmas-worlds", type=int, nargs="+", default=[VMAS_WORLDS],
                    help="run every VMAS task at each of these world counts (both sides alike)")
    ap.add_argument("--vmas-env-steps", type=int, nargs="+", default=None,
                    help="env-step budget of every VMAS run: one value, or one per --vmas-worlds entry "
                         "(default: 10 iterations, worlds x 1,000)")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of: {', '.join(SIDES)}")
    ap.add_argument("--raw-seconds", type=float, default=5.0, help="seconds of the raw env-rate loop, before and after")
    ap.add_argument("--benchmarl-python", default=str(DEFAULT_BENCHMARL_PY))
    ap.add_argument("--device", default="cpu", help="VMAS tasks: the device of the worlds, policy and learner on both "
                    "sides (marl: env_runners.device and one GPU per learner; BenchMARL: sampling, train and buffer "
                    "device); simple_spread always runs on the CPU")
    ap.add_argument("--log-dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--merge", action="append", default=[], metavar="JSON", help="add an earlier --json file's runs")
    args = ap.parse_args()
    bm_py = Path(args.benchmarl_python)
    sides_wanted = comma_list(args.sides, SIDES, "--sides")
    if any(s.startswith("BenchMARL") for s in sides_wanted) and not bm_py.exists():
        sys.exit(f"BenchMARL's python '{bm_py}' does not exist: run `bash benchmarks/peers/setup_benchmarl.sh` first")
    algos = comma_list(args.algos, ALGOS, "--algos")
    if args.tasks:
        envs_kept = {e for t in comma_list(args.tasks, ["spread", *VMAS_SCENARIOS, *ENV_GROUPS], "--tasks")
                     for e in ENV_GROUPS.get(t, [t])}
        algos = [a for a in algos if ALGOS[a][2] in envs_kept]
    budget_at = vmas_budgets(args)
    # (label, algorithm, worlds): simple_spread once, every VMAS task at each world count
    cases = [(case_label(a, w), a, w) for w in args.vmas_worlds for a in algos if ALGOS[a][2] != "spread"]
    cases = [(a, a, None) for a in algos if ALGOS[a][2] == "spread"] + cases
    if not cases:
        sys.exit("no task left: see --algos and --tasks")
    if args.log_dir:
        log_dir = Path(args.log_dir)
    else:
        import tempfile

        log_dir = Path(tempfile.mkdtemp(prefix="compare_benchmarl-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = "1"
    # marl's runs (and their Ray workers, which inherit the environment) import the marl of this checkout,
    # not whichever one the venv has installed.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])])
    print(f"compare_benchmarl: {C.machine_line()}; VMAS on {args.device}; load avg {os.getloadavg()[0]:.2f}; logs in {log_dir}", flush=True)

    def budget_of(label: str) -> int:
        algo, worlds = case_of(label)
        return args.env_steps if worlds is None else budget_at.get(worlds, 10 * worlds * 100)

    runs: list[Run] = [Run(**r) for path in args.merge for r in json.loads(Path(path).read_text())["runs"]]
    t_all = time.time()
    # each env's own random-action rate (VMAS: at each world count), before and after
    env_keys = {env_key(ALGOS[a][2], w): (ALGOS[a][2], w) for _, a, w in cases}
    raw = {k: [raw_rate(*ew, args.raw_seconds, args.device)] for k, ew in env_keys.items()}
    print("  raw env rates (random actions): " + "; ".join(f"{k} {r[0]:,.0f} env steps/s" for k, r in raw.items()), flush=True)
    if "spread" in env_keys:
        print(f"  simple_spread as PettingZoo's parallel_env() builds it (guard wrappers kept, as BenchMARL steps it): "
              f"{raw_pettingzoo_rate(args.raw_seconds):,.0f} env steps/s", flush=True)
    for seed in range(args.seeds):  # seed-major: an interrupted invocation still has whole seeds of every task
        for label, algo, worlds in cases:
            marl_task, bm_task, env = ALGOS[algo]
            extra = ["--max-env-steps", str(budget_of(label)), *([] if worlds is None else ["--worlds", str(worlds)]),
                     *([] if worlds is None or args.device == "cpu" else ["--device", args.device])]
            sides = [(side, bm_py if side.startswith("BenchMARL") else MARL_PY,
                      "benchmarl_tasks.py" if side.startswith("BenchMARL") else "marl_tasks.py",
                      bm_task if side.startswith("BenchMARL") else marl_task, [*SIDES[side](env, worlds), *extra])
                     for side in sides_wanted]
            sides = sides[seed % len(sides):] + sides[: seed % len(sides)]  # rotate the order with the seed
            for side, python, script, task, side_args in sides:
                print(f"  {label} seed {seed}: {side} ...", end=" ", flush=True)
                run = run_process(side, python, script, label.replace(", ", "_").replace(" ", "_"), task, seed,
                                  side_args, log_dir, False)
                run.task = label
                runs.append(run)
                print("FAILED, see " + run.log if run.failed else
                      f"{run.env_steps():,} env steps, {run.steps_per_s():,.0f}/s, first result {run.startup_s():.1f} s, "
                      f"peak {fmt_mb(run.peak_pss)}, return at end {fmt(run.return_at_end(budget_of(label)))}, "
                      f"load {run.load:.1f}", flush=True)
    for k, ew in env_keys.items():
        raw[k].append(raw_rate(*ew, args.raw_seconds, args.device))
    print_tables(runs, budget_of, raw)
    print(f"\ntotal {time.time() - t_all:.0f} s; load avg now {os.getloadavg()[0]:.2f}")
    if args.json:
        data = [{**{k: getattr(r, k) for k in ("side", "task", "seed", "t_spawn", "t_end", "rc", "peak_pss", "peak_rss",
                                                  "peak_procs", "log", "load")}, "events": r.events} for r in runs]
        Path(args.json).write_text(json.dumps({"machine": C.machine_line(), "args": vars(args), "runs": data,
                                               "table": ratio_table(runs, budget_of), "raw_env_rate": raw}, indent=1))


def ratio_table(runs: list[Run], budget_of) -> list[list[str]]:
    """marl / BenchMARL per task label (in the order the runs came) and marl side, medians over seeds."""
    table = []
    for label in dict.fromkeys(r.task for r in runs):
        bm = [r for r in runs if r.task == label and r.side == "BenchMARL" and not r.failed]
        for side in MARL_SIDES:
            ours = [r for r in runs if r.task == label and r.side == side and not r.failed]
            if not ours or not bm:
                continue
            name = f"{label} ({side})"
            table.append(ratio_row(f"{name}: env steps/s incl. learning", [r.steps_per_s() for r in ours],
                                   [r.steps_per_s() for r in bm], "", "higher", TARGETS["steps_per_s"]))
            table.append(ratio_row(f"{name}: process start to first result", [r.startup_s() for r in ours],
                                   [r.startup_s() for r in bm], " s", "lower", TARGETS["startup"]))
            table.append(ratio_row(f"{name}: peak memory (PSS, process tree)", [r.peak_pss / 2**20 for r in ours],
                                   [r.peak_pss / 2**20 for r in bm], " MB", "lower", TARGETS["memory"]))
            budget = budget_of(label)
            m_ret = [r.return_at_end(budget) for r in ours]
            b_ret = [r.return_at_end(budget) for r in bm]
            table.append([f"{name}: return at {budget:,} env steps (last 20 %, median; seeds)", fmt(C.median(m_ret)),
                          fmt(C.median(b_ret)), f"{C.spread(m_ret)} vs {C.spread(b_ret)}", "not worse",
                          "n/a" if C.median(m_ret) != C.median(m_ret) or C.median(b_ret) != C.median(b_ret)
                          else "met" if C.median(m_ret) >= min(b_ret) else "MISSED"])
    return table


def print_tables(runs: list[Run], budget_of, raw: dict[str, list[float]]) -> None:
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
    C.print_table(["figure (median over seeds)", "marl", "BenchMARL", "marl better by", "target", "verdict"],
                  ratio_table(runs, budget_of),
                  title="marl vs BenchMARL (times and memory: BenchMARL / marl; throughput: marl / BenchMARL)")
    rows = []
    for label in dict.fromkeys(r.task for r in runs):
        algo, worlds = case_of(label)
        key = env_key(ALGOS[algo][2], worlds)
        for side in SIDES:
            rates = [r.steps_per_s() for r in runs if r.task == label and r.side == side and not r.failed]
            if rates and key in raw:
                share = C.median(rates) / (sum(raw[key]) / len(raw[key]))
                # BenchMARL's rows: the most marl / BenchMARL could be with the env as the only cost (no runner, no learner)
                ceiling = fmt(1 / share, "x") if side == "BenchMARL" else ""
                rows.append([f"{label} ({side})", fmt(C.median(rates)), fmt(share), ceiling,
                             ">= 0.9" if algo == "IPPO" and side.startswith("marl overlap") else ""])
    C.print_table(["env steps/s incl. learning (median)", "rate", "/ raw env rate", "raw env rate / this", "target"], rows,
                  title="Against each env's own random-action rate, measured in this invocation (before / after): "
                        + "; ".join(f"{e} {' / '.join(f'{x:,.0f}' for x in r)} env steps/s" for e, r in raw.items())
                        + " (simple_spread: 8 envs)")


if __name__ == "__main__":
    main()
