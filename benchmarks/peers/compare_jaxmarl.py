"""marl PPO against JaxMARL's own IPPO (baselines/IPPO/ippo_ff_mpe.py) at matched settings, alternating runs.

    JAXMARL_SRC=/path/to/JaxMARL bash benchmarks/peers/setup_jaxmarl.sh      # once: JaxMARL's venv
    nice .venv/bin/python benchmarks/peers/compare_jaxmarl.py --seeds 3 --env-steps 200000 --json runs/jaxmarl.json

Sides, each a fresh process: `JaxMARL` (its script's make_train, jitted whole, in its venv:
jaxmarl_baseline.py), `marl jaxmarl` (marl PPO on `jaxmarl.MPE_simple_spread_v3` through the JaxMARL
adapter) and `marl vmas` (marl PPO on `vmas.simple_spread`, discrete actions, 25 steps). Settings: JaxMARL's
published baselines/IPPO/config/ippo_ff_mpe.yaml on its side; on marl's the preset composition
`algorithm=ippo task=jaxmarl/simple_spread experiment=jaxmarl_ippo_ff_mpe` (task=vmas/simple_spread for `marl vmas`;
`marl_items` gives the items): 4 epochs x 4 minibatches, 64x64 tanh, lr 2.5e-4 annealed linearly to 0 at the budget
(ANNEAL_LR), clip 0.2 (the value's too), entropy 0.01, value weight 0.5, gradient norm 0.5, gamma 0.99, lambda
0.95, Adam eps 1e-5, one policy shared by the 3 agents. Both sides change only NUM_ENVS x NUM_STEPS (16 x 128, the
published, or 1024 x 32 / 4096 x 32: worlds x fragment length; the batch and minibatches follow), the seed and a
fixed env-step budget (TOTAL_TIMESTEPS, rounded up to whole iterations). (Until 2026-11-28 both sides ran at a
constant lr, ANNEAL_LR off.) Per seed the sides run back to back, their order rotating with the seed.
Reported: env steps/s including learning (after start-up), start-up (process start to ready to
train: imports, env build and JaxMARL's compile; for marl up to the end of its first iteration, which
compiles the JaxMARL step), the return at equal env steps (mean of the
per-iteration returns over the last 20 % of the budget, summed over agents on every side; JaxMARL's
MPELogWrapper logs the reward times the number of agents, which for this shared-reward task is that
sum; JaxMARL's MPE episodes last 26 steps, VMAS's 25), and ratios marl/JaxMARL. `--json OUT` writes the rows.
Known differences not matched: JaxMARL IPPO trains on the reward times 3, and treats the time limit
as termination; marl bootstraps at truncation. VMAS's simple_spread is VMAS's port (its own reward
scale), so its return ratio is indicative only. marl's sides keep the preset's `learners.compile_loss` (its PPO
loss through torch.compile, as JaxMARL's update is XLA-compiled; the compilation falls in marl's start-up);
`--eager-loss` turns it off.
`--overlap` runs marl's sides with `env_runners.overlap` and one runner actor: it samples the next round
while the learner trains on this one (half a batch of policy lag, which PPO's ratio to the acting policy's
log-probs corrects); start-up then includes Ray's, and per-CPU-second figures are left out (nan: the
actor's CPU is another process's). The `marl jaxmarl` side samples through the compiled rollout (one jitted scan
per fragment: `env_runners.compiled_rollout`, auto; `--compiled-rollout false` turns it off, and the side
`marl jaxmarl stepwise`, not run unless named in `--sides`, is the adapter with it off, for a ratio in one run).

On a GPU (`--device cuda`, with the 4096x32 setting): marl's env (VMAS's torch worlds, or JaxMARL's
through DLPack), policy and learner run on the device (`env_runners.device: cuda`,
`learners.num_gpus_per_learner: 1`); JaxMARL runs on its default backend, the GPU. Where JaxMARL lives
in the same interpreter rather than a venv: `--jaxmarl-python python3 --jaxmarl-src DIR`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SETTINGS = {"16x128": (16, 128), "1024x32": (1024, 32), "4096x32": (4096, 32)}
SIDES = ("JaxMARL", "marl jaxmarl", "marl vmas", "marl jaxmarl stepwise")
DEFAULT_SIDES = SIDES[:3]
ROLLOUT = {"auto": "auto", "true": True, "false": False}


PRESET = ["algorithm=ippo", "experiment=jaxmarl_ippo_ff_mpe"]  # with the side's task: JaxMARL's IPPO-FF MPE settings
TASKS = {"jaxmarl.MPE_simple_spread_v3": "task=jaxmarl/simple_spread", "vmas.simple_spread": "task=vmas/simple_spread"}


def marl_items(env: str, worlds: int, steps: int, budget: int, seed: int, threads: int, compile_loss: bool,
               device: str = "cpu", overlap: bool = False, compiled_rollout="auto") -> list[str]:
    """marl's side as `marl train` items: the preset composition, the setting's worlds x steps (the preset sizes its
    batch and minibatches from them), the budget rounded up to whole updates with the learning rate annealed to 0 at
    it as JaxMARL's ANNEAL_LR does at its TOTAL_TIMESTEPS (factor 1 - u / NUM_UPDATES at update u: marl reads the
    schedule at the env steps sampled, one update's more), and this script's run options."""
    per_update = worlds * steps
    total = -(-budget // per_update) * per_update
    return [*PRESET, TASKS[env], f"env_runners.num_envs_per_env_runner={worlds}",
            f"env_runners.rollout_fragment_length={steps}", f"stop.env_steps_total={total}",
            f"learners.lr_multiplier=[[{per_update},1.0],[{total + per_update},0.0]]", f"debugging.seed={seed}",
            f"env_runners.device={device}", f"env_runners.num_env_runners={int(overlap)}", f"env_runners.overlap={overlap}",
            f"env_runners.compiled_rollout={compiled_rollout}", f"learners.num_threads={threads or 'null'}",
            f"learners.compile_loss={compile_loss}", f"learners.num_gpus_per_learner={int(device != 'cpu')}",
            "loggers.tensorboard=false", "loggers.csv=false"]


def marl_side(env: str, worlds: int, steps: int, budget: int, seed: int, threads: int, compile_loss: bool,
              device: str = "cpu", overlap: bool = False, compiled_rollout="auto") -> dict:
    """One marl run (in this process: started by `--side`)."""
    t0 = time.time()
    from marl.config.compose import compose

    items = marl_items(env, worlds, steps, budget, seed, threads, compile_loss, device, overlap, compiled_rollout)
    algo = compose(None, items, name="ippo-jaxmarl").config(validate=True).build()
    local = algo.runners.local  # (None with overlap: the runner actor's path is the same config's)
    compiled = None if local is None else getattr(local, "compiled", None) is not None
    returns, env_steps, first = [], 0, None
    sample_s = learn_s = 0.0  # over the timed iterations: where marl's time goes
    while env_steps < budget or first is None or len(returns) < 2:
        result = algo.train()
        if first is None:  # the first iteration compiles the JaxMARL step (and the loss): start-up, as JaxMARL's compile is
            first, first_steps, cpu = time.time(), int(result["env_steps_total"]), time.process_time()
        else:
            sample_s += result["perf/sample_time_s"]
            learn_s += result["perf/learn_time_s"]
        env_steps = int(result["env_steps_total"])
        returns.append(float(result.get("episode_return_mean", float("nan"))))
    done, cpu = time.time(), time.process_time() - cpu
    if overlap:  # the runner actor's CPU is another process's: this one's alone would flatter marl
        cpu = float("nan")
    algo.stop()
    return {"startup_s": first - t0, "train_s": done - first, "cpu_s": cpu, "env_steps": env_steps,
            "timed_env_steps": env_steps - first_steps, "env_steps_per_update": worlds * steps, "returns": returns,
            "sample_s": sample_s, "learn_s": learn_s, "compiled_rollout": compiled}


def jaxmarl_overrides(worlds: int, steps: int, budget: int, seed: int) -> dict:
    """JaxMARL's side: its published ippo_ff_mpe.yaml but for these keys (the setting, the seed, the budget)."""
    per_update = worlds * steps
    return {"NUM_ENVS": worlds, "NUM_STEPS": steps, "SEED": seed, "NUM_SEEDS": 1,
            "TOTAL_TIMESTEPS": -(-budget // per_update) * per_update}


def run_side(side: str, setting: str, budget: int, seed: int, jax_python: Path, src: str, threads: int,
             compile_loss: bool, device: str = "cpu", overlap: bool = False, compiled_rollout: str = "auto") -> dict:
    worlds, steps = SETTINGS[setting]
    if side == "JaxMARL":
        cmd = [str(jax_python), str(HERE / "jaxmarl_baseline.py"), src, "baselines/IPPO/ippo_ff_mpe.py", "",
               json.dumps(jaxmarl_overrides(worlds, steps, budget, seed))]
    else:
        env = "vmas.simple_spread" if side == "marl vmas" else "jaxmarl.MPE_simple_spread_v3"
        rollout = "false" if side == "marl jaxmarl stepwise" else compiled_rollout
        cmd = [sys.executable, __file__, "--side", env, setting, str(budget), str(seed), str(threads), str(int(compile_loss)),
               device, str(int(overlap)), rollout]
    # One thread: XLA's Eigen pool off and one OpenMP thread. More: both sides use that many (XLA takes every core).
    # 0: each side at its defaults (XLA's pool; marl's learner on the cores it owns).
    flags = {} if threads == 0 else {"OMP_NUM_THREADS": str(threads)} if threads > 1 else {
        "OMP_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600, env={**os.environ, **flags})
    if p.returncode != 0:
        raise SystemExit(f"{side} {setting} seed {seed} failed:\n{p.stderr[-3000:]}")
    row = json.loads(p.stdout.strip().splitlines()[-1])
    tail = row["returns"][int(len(row["returns"]) * 0.8):] or row["returns"][-1:]
    timed = row.get("timed_env_steps", row["env_steps"])
    return {"side": side, "setting": setting, "seed": seed, "threads": threads, "device": device,
            "compile_loss": compile_loss and side != "JaxMARL", "overlap": overlap and side != "JaxMARL", **row,
            "env_steps_per_s": timed / row["train_s"],
            "env_steps_per_cpu_s": timed / row["cpu_s"],
            "final_return": statistics.fmean(tail)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=200_000, help="env-step budget per run")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--jaxmarl-venv", default=str(HERE.parent / ".jaxmarl-venv"))
    parser.add_argument("--threads", type=int, default=1,
                        help="threads per side: 1 (default) turns XLA's Eigen pool off and gives marl's learner one "
                             "thread; N > 1 leaves XLA its default pool and gives marl's learner N threads; 0: both "
                             "sides at their defaults (marl's learner: learners.num_threads unset)")
    parser.add_argument("--eager-loss", action="store_true",
                        help="marl sides: learners.compile_loss=false (the preset compiles the loss)")
    parser.add_argument("--device", default="cpu", help="marl sides: env_runners.device and the learner's (cpu, cuda)")
    parser.add_argument("--sides", nargs="+", default=list(DEFAULT_SIDES), choices=list(SIDES),
                        help="'marl jaxmarl stepwise': the JaxMARL adapter with env_runners.compiled_rollout false")
    parser.add_argument("--compiled-rollout", default="auto", choices=list(ROLLOUT),
                        help="marl sides: env_runners.compiled_rollout (auto: the compiled rollout on the JaxMARL adapter)")
    parser.add_argument("--jaxmarl-python", help="the interpreter JaxMARL's side runs in (default: the venv's)")
    parser.add_argument("--jaxmarl-src", help="the JaxMARL checkout (default: the one the venv names)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--overlap", action="store_true",
                        help="marl sides: env_runners.overlap with one runner actor (it samples the next round while "
                             "the learner trains: one round of policy lag, corrected by PPO's ratio)")
    parser.add_argument("--side", nargs=9, metavar=("ENV", "SETTING", "BUDGET", "SEED", "THREADS", "COMPILE", "DEVICE",
                                                    "OVERLAP", "ROLLOUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:  # a marl run in this fresh process
        env, setting, budget, seed, threads, compile_loss, device, overlap, rollout = args.side
        print(json.dumps(marl_side(env, *SETTINGS[setting], int(budget), int(seed), int(threads), compile_loss == "1",
                                   device, overlap == "1", ROLLOUT[rollout])))
        return
    venv = Path(args.jaxmarl_venv)
    src = C.jaxmarl_source(venv, args.jaxmarl_src)
    jax_python = Path(args.jaxmarl_python) if args.jaxmarl_python else venv / "bin" / "python"
    print(f"compare_jaxmarl: {C.machine_line()}, marl device {args.device}", flush=True)
    sides = [s for s in SIDES if s in args.sides]
    rows = []
    for setting in args.settings:
        for seed in range(args.seeds):
            order = sides[seed % len(sides):] + sides[:seed % len(sides)]  # alternate who runs first (the machine drifts)
            for side in order:
                row = run_side(side, setting, args.env_steps, seed, jax_python, src, args.threads, not args.eager_loss,
                               args.device, args.overlap, args.compiled_rollout)
                rows.append(row)
                print(f"{setting} seed {seed} {side:>12}: {row['env_steps_per_s']:>9,.0f} env steps/s "
                      f"({row['env_steps_per_cpu_s']:,.0f} per CPU-s, load {os.getloadavg()[0]:.1f}), start-up "
                      f"{row['startup_s']:5.1f} s, return {row['final_return']:8.2f} @ {row['env_steps']:,}"
                      + (f", sampling {row['sample_s']:.1f} s + learning {row['learn_s']:.1f} s of {row['train_s']:.1f} s"
                         if "sample_s" in row else "")
                      + (" (compiled rollout)" if row.get("compiled_rollout") else ""), flush=True)
    table = []
    for setting in args.settings:
        med = {side: {k: statistics.median(r[k] for r in rows if r["side"] == side and r["setting"] == setting)
                      for k in ("env_steps_per_s", "env_steps_per_cpu_s", "startup_s", "final_return")} for side in sides}
        base = med.get("JaxMARL", med[sides[0]])
        for side in sides:
            m = med[side]
            table.append([setting, side, f"{m['env_steps_per_s']:,.0f}", f"{m['env_steps_per_s'] / base['env_steps_per_s']:.3f}",
                          f"{m['env_steps_per_cpu_s']:,.0f}", f"{m['env_steps_per_cpu_s'] / base['env_steps_per_cpu_s']:.3f}",
                          f"{m['startup_s']:.1f} s", f"{m['startup_s'] / base['startup_s']:.2f}", f"{m['final_return']:.2f}"])
    C.print_table(["settings", "side", "env steps/s incl. learning", "/ JaxMARL", "per CPU-second", "/ JaxMARL",
                   "start-up", "/ JaxMARL", "return at the budget"], table,
                  title=f"medians over seeds, ratios marl / JaxMARL ({args.threads} thread(s) per side, marl on {args.device}"
                        f"{', marl loss eager (--eager-loss)' if args.eager_loss else ''}"
                        f"{', marl env_runners.overlap (one runner actor)' if args.overlap else ''}"
                        f"{f', marl env_runners.compiled_rollout {args.compiled_rollout}' if args.compiled_rollout != 'auto' else ''})")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
