"""marl PQN_VDN against JaxMARL's own PQN-VDN (baselines/QLearning/pqn_vdn_ff.py) on MPE simple_spread at its settings, per seed.

    JAXMARL_SRC=/path/to/JaxMARL bash benchmarks/peers/setup_jaxmarl.sh      # once: JaxMARL's venv
    nice .venv/bin/python -m benchmarks --save compare_jaxmarl_pqn --env-steps 1500000 --seeds 0 1 2 \
        --raw-dir runs/pqn_vdn_jaxmarl/raw --json runs/pqn_vdn_jaxmarl/marl_eval.json --report docs/results/pqn_vdn_jaxmarl

Sides, each a fresh process, back to back per seed, the order rotating with the seed: `JaxMARL` (the script's
make_train over its published config, config.yaml + alg/pqn_vdn_ff_mpe.yaml, jitted whole, in its venv:
jaxmarl_baseline.py) and `marl` (PQN_VDN on `jaxmarl.MPE_simple_spread_v3` through the JaxMARL adapter, the batched
path: one jitted env call per step, as the compiled rollout mirrors no Q network; composed as `algorithm=pqn_vdn task=jaxmarl/simple_spread
experiment=jaxmarl_pqn_vdn_ff_mpe`: that preset lists every setting with its JaxMARL key, and what marl cannot
express). A budget below JaxMARL's TOTAL_TIMESTEPS (1e7) runs a prefix of its schedule: JaxMARL's EPS_DECAY (a
fraction of NUM_UPDATES) is rescaled so that epsilon still reaches 0.1 after 244.1 updates (999,834 env steps),
as in the full run; marl's preset has that schedule in env steps, its stop.env_steps_total is the budget.
JaxMARL's greedy test (512 worlds every 5 % of the updates, as published) runs and is kept, not compared.

Returns, the same on both sides: the team's return summed over the agents, with exploration, per update. JaxMARL's
is its own per-update metric, the mean over the update's steps, worlds and agents of MPELogWrapper's
`returned_episode_returns` (each agent's reward times 3, summed over the last finished episode of that world: the
mean over agents is the sum over agents); the leading updates whose mean also holds the zeros of worlds with no
finished episode yet (the first two: 26-step episodes, 16-step updates) are dropped. marl's is the iteration's
`episode_return_mean` (one update per iteration: the episodes that ended in it; none end in some 16-step
iterations). Both are binned at equal env steps (`--bin` updates of 4,096 env steps) into one marl-eval JSON
(environment jaxmarl, task simple_spread, algorithms `pqn_vdn-marl` and `pqn_vdn-jaxmarl`; a bin's list: its updates' returns; the
score, absolute_metrics: the returns over the last 10 % of the budget), and `--report DIR` runs `marl report`
on it (IQM and mean with rliable's 95 % CIs, sample-efficiency curves). Printed: per seed the return at 25/50/75/100 %
of the budget (the mean over the 10 % before the point) with the IQM over seeds [95 % CI]; per run the wall time
(process start to the end of training), start-up (to the end of the first update: imports, build, JaxMARL's
compile; marl's first iteration compiles its JaxMARL rollout) and env steps/s after it. `--raw-dir` keeps each
run's output (a run whose file is there is read, not rerun: an interrupted comparison resumes). `--sides
marl-terminal` runs an ablation, printed but kept out of the JSON: marl with the adapter's time limit marked as a
termination (no bootstrap at the 26th step), the way JaxMARL's script treats done["__all__"].
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

T0 = time.time()

import _path  # noqa: E402,F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C  # noqa: E402
from _peer_curves import WINDOW, add_side_by_side_arguments, marl_eval, tables, train_to_budget, window_mean  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SIDES = ("JaxMARL", "marl")
ABLATIONS = ("marl-terminal",)  # run only when named in --sides; printed, not in the marl-eval JSON
PER_UPDATE = 256 * 16  # NUM_ENVS x NUM_STEPS: env steps per update on both sides
PRESET = ["algorithm=pqn_vdn", "task=jaxmarl/simple_spread", "experiment=jaxmarl_pqn_vdn_ff_mpe"]


def jaxmarl_overrides(src: str, budget: int, seed: int) -> dict:
    """The published config's keys this comparison changes: the budget, the seed and EPS_DECAY rescaled to the
    prefix (epsilon's decay stays EPS_DECAY x the published NUM_UPDATES updates long)."""
    import yaml

    conf = Path(src) / "baselines" / "QLearning" / "config" / "alg" / "pqn_vdn_ff_mpe.yaml"
    pub = yaml.safe_load(conf.read_text())
    updates = int(float(pub["TOTAL_TIMESTEPS"])) // pub["NUM_STEPS"] // pub["NUM_ENVS"]  # ("1e7": a str to PyYAML)
    ours = budget // pub["NUM_STEPS"] // pub["NUM_ENVS"]
    return {"TOTAL_TIMESTEPS": budget, "SEED": seed, "EPS_DECAY": pub["EPS_DECAY"] * updates / ours}


def time_limit_as_termination() -> None:
    """The ablation `marl-terminal`: the adapter marks a world that reached the env's max_steps terminated, not
    truncated (no bootstrap at the time limit), as JaxMARL's script treats done["__all__"]. In this process only."""
    import marl.envs.jaxmarl_packed as packed

    packed._step_count = lambda reached: -1  # never >= max_steps: every end of an episode is a termination


def marl_side(seed: int, budget: int, threads: int, terminal: bool = False) -> dict:
    """One marl run in this process (started by `--side`): per update, its env steps, return, length and loss."""
    from marl.config.compose import compose

    if terminal:
        time_limit_as_termination()

    items = [*PRESET, f"debugging.seed={seed}", f"stop.env_steps_total={budget}", f"learners.num_threads={threads}",
             "loggers.tensorboard=false", "loggers.csv=false"]
    algo = compose(None, items, name="pqn_vdn-jaxmarl").config(validate=True).build()
    row = train_to_budget(algo, budget, T0, {"returns": "episode_return_mean", "lengths": "episode_len_mean",
                                             "loss": "losses/default_policy/loss"})
    compiled = getattr(getattr(getattr(algo, "runners", None), "local", None), "compiled", None) is not None
    algo.stop()
    return {"compiled_rollout": compiled, "time_limit_terminal": terminal, "env_steps_per_update": PER_UPDATE, **row}


def run_side(side: str, seed: int, budget: int, jax_python: Path, src: str, threads: int, raw_dir: Path) -> dict:
    raw = raw_dir / f"{side}_seed{seed}.json"
    if raw.is_file():
        print(f"seed {seed} {side}: read from {raw}", flush=True)
        return json.loads(raw.read_text())
    if side == "JaxMARL":
        cmd = [str(jax_python), str(HERE / "jaxmarl_baseline.py"), src, "baselines/QLearning/pqn_vdn_ff.py",
               "pqn_vdn_ff_mpe", json.dumps(jaxmarl_overrides(src, budget, seed))]
    else:
        cmd = [sys.executable, __file__, "--side", str(seed), str(budget), str(threads)] + ["--terminal"] * (
            side == "marl-terminal")
    # One thread: XLA's Eigen pool off, one intra-op thread, one OpenMP thread (marl: learners.num_threads 1).
    flags = {"OMP_NUM_THREADS": str(threads), "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
                                                        f"intra_op_parallelism_threads={threads}"}
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=6 * 3600, env={**os.environ, **flags})
    if p.returncode != 0:
        raise SystemExit(f"{side} seed {seed} failed:\n{p.stderr[-3000:]}")
    row = {"side": side, "seed": seed, "command": cmd, **json.loads(p.stdout.strip().splitlines()[-1])}
    raw_dir.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(row))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-steps", type=int, default=1_500_000,
                        help="env-step budget per run (JaxMARL's: 1e7); rounded down to whole updates of 4,096")
    parser.add_argument("--bin", type=int, default=10, help="updates per point of the marl-eval JSON")
    add_side_by_side_arguments(parser, ROOT / "runs" / "pqn_vdn_jaxmarl" / "raw")
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES + ABLATIONS,
                        help="marl-terminal: marl with the time limit as termination (JaxMARL's treatment), an ablation")
    parser.add_argument("--side", nargs=3, metavar=("SEED", "BUDGET", "THREADS"), help=argparse.SUPPRESS)
    parser.add_argument("--terminal", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:  # a marl run in this fresh process
        print(json.dumps(marl_side(*map(int, args.side), terminal=args.terminal)))
        return
    venv = Path(args.jaxmarl_venv)
    src = C.jaxmarl_source(venv, args.jaxmarl_src)
    budget = args.env_steps // PER_UPDATE * PER_UPDATE
    print(f"compare_jaxmarl_pqn: {C.machine_line()}, {budget:,} env steps per run, seeds {args.seeds}", flush=True)
    rows = []
    sides = [s for s in SIDES + ABLATIONS if s in args.sides]
    for i, seed in enumerate(args.seeds):
        for side in sides[i % len(sides):] + sides[:i % len(sides)]:  # alternate who runs first (the machine drifts)
            # JaxMARL is handed the budget as given (its NUM_UPDATES rounds it down as `budget` does)
            row = run_side(side, seed, args.env_steps if side == "JaxMARL" else budget, venv / "bin" / "python", src,
                           args.threads, Path(args.raw_dir))
            rows.append(row)
            print(f"seed {seed} {side:>7}: return {window_mean(row, (1 - WINDOW) * budget, budget):8.2f} over the last "
                  f"10 %, {row['startup_s'] + row['train_s']:.0f} s (start-up {row['startup_s']:.0f} s), load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    tables(rows, budget, args.reps)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        ours = [r for r in rows if r["side"] in SIDES]  # the ablations are printed, not compared
        place = lambda r: ("jaxmarl", "simple_spread", f"pqn_vdn-{r['side'].lower()}")  # noqa: E731
        Path(args.json).write_text(json.dumps(marl_eval(ours, budget, args.bin * PER_UPDATE, place), indent=1))
        if args.report:
            from marl.experiment.report import write_report

            points = -(-budget // (args.bin * PER_UPDATE))
            print("report:", *write_report([args.json], args.report, reps=args.reps, points=points), sep="\n  ")


if __name__ == "__main__":
    main()
