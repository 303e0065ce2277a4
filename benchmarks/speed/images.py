"""Image observations: memory per stored frame (uint8 vs float32) and a PettingZoo image env's sampling rate.

    .venv/bin/python benchmarks/speed/images.py [--seconds 3] [--repeats 3] [--envs 4] [--fragment 32] [--size 32]

* **memory per stored frame**: a DQN runner's batch on the downscaled Pistonball
  (obs and next_obs columns) put into a replay buffer, bytes per stored row of each
  column, and the pickled batch per row (what a remote runner puts in Ray's object store): frames kept as uint8 by the default (conv) module, and flattened to float32
  for a module that does not take images (`keeps_image_obs = False`, what marl did before);
* **env steps/s**: one in-process EnvRunner with the default conv module (PPO) against a
  random-action loop over the same envs (the env's own limit), interleaved chunk by chunk
  as in `sampling.py`; medians over repeats;
* **peak memory**: the peak resident set (VmHWM) of a fresh process that builds the
  envs and samples for `--seconds` — the random loop alone vs the marl runner (which
  also imports torch and holds the conv module).

With `--defaults`, instead: **PPO's defaults on full Pistonball** (`marl train --algo PPO --env
pettingzoo.butterfly.pistonball_v6`: 20 pistons, 457x120 RGB crops, Box actions), one fresh process per side,
the sides one after the other in the same run: *before*, the settings those defaults had before images got
their own (`environment.wrappers: []`, full-size frames; PPO's Box `auto` values: 6 epochs of 128-row
minibatches, [256, 256] head), written out; *after*, the defaults (`wrappers: auto` resizes to 42x42, PPO's
IMAGE `auto` values). Per side: seconds per iteration (its sample and learn parts) and the peak resident set.

    .venv/bin/python benchmarks/speed/images.py --defaults [--iterations 3] [--before-iterations 1]
    .venv/bin/python benchmarks/speed/images.py --learn 60   # the defaults for 60 iterations against a random policy
    .venv/bin/python benchmarks/speed/images.py --conversion [--seconds 3] [--repeats 3]

`--learn N` trains the defaults for N iterations (seed 0) and compares the mean return of the episodes that
finished in its last N/4 iterations with a random-action loop's episodes on the same env (returns summed
over the 20 pistons, as `episode_return_mean` sums an episode's agents). With `--from-run RUN_DIR` it reads the
iterations of a finished run of the defaults instead (`marl train --algo PPO --env pettingzoo.butterfly.pistonball_v6
debugging.seed=0 stop.env_steps_total=N`, resumable with `--resume`: budgets of hours), and runs only the random side.

`--conversion` steps full Pistonball (raw frames, and resized to 42x42 as the defaults' wrappers do) with
random actions through PettingZoo's `aec_to_parallel_wrapper` and through marl's `ObserveOnceConversion`
(the same step without the `last()` observations upstream throws away), interleaved, one process.

The env of the other rows is `pettingzoo.butterfly.pistonball_v6` (n_pistons, discrete actions) made grey and
downscaled by SuperSuit (`color_reduction_v0`, `resize_v1`) to size x size uint8, with marl's
`frame_stack` connector (k=3): size x size x 3 uint8 module inputs, as `scenarios/pistonball_cnn.yaml`.
The random loop steps the same SuperSuit-wrapped envs (the wrappers' cost is the env's own).
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl
from marl.data import sample_batch as sb
from marl.envs import register_env
from marl.modules import QMLP
from marl.runners import EnvRunner

ENV = "pistonball_small"


def make_pistonball(config: dict):
    import supersuit
    from pettingzoo.butterfly import pistonball_v6

    config = dict(config)
    size = int(config.pop("size", 32))
    grey = supersuit.color_reduction_v0(pistonball_v6.parallel_env(continuous=False, **config), "B")
    return supersuit.resize_v1(grey, size, size)


register_env(ENV, make_pistonball)


def env_config(args) -> dict:
    return {"n_pistons": args.pistons, "max_cycles": 125, "size": args.size}


def runner_config(args, algo=marl.PPOConfig, module_class=None):
    cfg = (
        algo()
        .environment(ENV, env_config=env_config(args))
        .env_runners(num_envs_per_env_runner=args.envs, rollout_fragment_length=args.fragment)
        .multi_agent(policies={"shared": {"module_class": module_class} if module_class else {}}, policy_mapping_fn={"*": "shared"})
        .connectors(env_to_module=[{"name": "frame_stack", "k": 3}])
        .debugging(seed=0)
    )
    cfg.validate()
    return cfg


class FlatFloatQ(QMLP):
    keeps_image_obs = False  # images flattened to float32 by the pipeline (marl's behaviour before images)


def frame_memory(args) -> list[list]:
    from marl.replay import ReplayBuffer

    rows = []
    for label, module_class in (("uint8 (default conv module)", None), ("float32 (flattened, keeps_image_obs=False)", "__main__:FlatFloatQ")):
        runner = EnvRunner(runner_config(args, marl.DQNConfig, module_class), 0)
        batch = runner.sample()["shared"]
        buffer = ReplayBuffer(len(batch))
        buffer.add(batch)
        obs, nxt = buffer.columns[sb.OBS], buffer.columns[sb.NEXT_OBS]
        per_row = (obs.nbytes + nxt.nbytes) / len(buffer)
        all_cols = sum(c.nbytes for c in buffer.columns.values()) / len(buffer)
        payload = len(pickle.dumps(batch, protocol=5)) / len(batch)  # what a remote runner ships per row (Ray pickles numpy as is)
        rows.append([label, f"{obs.dtype} {obs.shape[1:]}", f"{obs.nbytes / len(buffer):,.0f}", f"{per_row:,.0f}", f"{all_cols:,.0f}",
                     f"{1e9 / all_cols / 1e3:,.0f}k", f"{payload:,.0f}"])
    return rows


def rates(args) -> tuple[float, float]:
    sys.path.insert(0, str(C.REPO_ROOT / "benchmarks" / "speed"))
    from sampling import RandomLoop, measure_pair

    runner = EnvRunner(runner_config(args), 0)
    loop = RandomLoop(ENV, env_config(args), args.envs, False, 0)
    runner.sample()
    loop.run(20)
    raw, ours = [], []
    for r in range(args.repeats):
        a, b = measure_pair(runner, loop, args.fragment, args.seconds, random_first=r % 2 == 0)
        raw.append(a)
        ours.append(b)
        print(f"  repeat {r}: random loop {a:,.0f} env steps/s, marl runner {b:,.0f} ({b / a:.3f})", flush=True)
    loop.close()
    return raw, ours


def peak_child(args, mode: str) -> dict:
    """Runs this script's `--child MODE` in a fresh process; its peak RSS and steps/s."""
    cmd = [sys.executable, __file__, "--child", mode, "--seconds", str(args.seconds), "--envs", str(args.envs),
           "--fragment", str(args.fragment), "--size", str(args.size), "--pistons", str(args.pistons)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def vm_hwm_mb() -> float:
    """This process's peak resident set (VmHWM). Not ru_maxrss: Linux carries that over fork+exec from the
    parent, so every child would report at least the parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args) -> None:
    if args.child == "random":
        sys.path.insert(0, str(C.REPO_ROOT / "benchmarks" / "speed"))
        from sampling import RandomLoop

        loop = RandomLoop(ENV, env_config(args), args.envs, False, 0)
        steps, elapsed = C.run_for(args.seconds, lambda: loop.run(args.fragment))
    else:
        runner = EnvRunner(runner_config(args), 0)
        steps, elapsed = C.run_for(args.seconds, lambda: runner.sample().env_steps)
    peak_mb = vm_hwm_mb()
    print(json.dumps({"peak_mb": peak_mb, "steps_per_s": steps / elapsed}))


PISTONBALL = "pettingzoo.butterfly.pistonball_v6"
# PPO's Box `auto` values, what full Pistonball got before image observations had their own (action_space_defaults)
BEFORE_TRAINING = {"gae_lambda": 0.1, "minibatch_size": 128, "num_epochs": 6, "vf_loss_coeff": 1.0, "grad_clip": None,
                   "model": {"hiddens": [256, 256], "activation": "relu"}}


def pistonball_config(side: str):
    cfg = marl.PPOConfig().environment(PISTONBALL).debugging(seed=0)
    if side == "before":
        cfg.environment(wrappers=[]).training(**BEFORE_TRAINING)
    return cfg


def train_child(side: str, iterations: int, max_minutes: float | None = None) -> None:
    """`iterations` of PPO on full Pistonball in this process (fewer where `max_minutes` of training run out first);
    one JSON line: per-iteration times, returns, peak RSS. Each iteration's row also goes to stderr as it ends."""
    algo = pistonball_config(side).build()
    resolved = algo.config
    rows, start = [], time.perf_counter()
    for _ in range(iterations):
        r = algo.train()
        rows.append({"time_s": r["time_this_iter_s"], "return": r["episode_return_mean"], "episodes": r.get("episodes_this_iter", 0),
                     "env_steps": r["env_steps_total"],
                     **{k.split("/")[1]: v for k, v in r.items() if k.startswith("perf/") and k.endswith("_time_s")}})
        print(f"iteration {len(rows)}: {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
        if max_minutes and time.perf_counter() - start > 60 * max_minutes:
            break
    algo.stop()
    t = resolved.training_cfg
    print(json.dumps({"rows": rows, "peak_mb": vm_hwm_mb(), "wrappers": resolved.environment_cfg.wrappers,
                      "training": {"num_epochs": t.num_epochs, "minibatch_size": t.minibatch_size, "model": t.model}}))


def run_child(args, mode: str, side: str, iterations: int, timeout: float | None = None, progress: bool = False) -> dict:
    """The child's JSON line; with `progress`, its stderr (a line per iteration, its log) goes to this process's."""
    cmd = [sys.executable, __file__, "--child", mode, "--side", side, "--iterations", str(iterations)]
    if args.max_minutes:
        cmd += ["--max-minutes", str(args.max_minutes)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None if progress else subprocess.PIPE, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"{side} child failed" + (f":\n{out.stderr[-3000:]}" if out.stderr else " (its stderr above)"))
    return json.loads(out.stdout.strip().splitlines()[-1])


def random_returns(episodes: int, seed: int = 0) -> list[float]:
    """Returns (summed over the pistons) of `episodes` episodes of uniformly random actions on full Pistonball."""
    from pettingzoo.butterfly import pistonball_v6

    env = pistonball_v6.parallel_env()
    out = []
    for ep in range(episodes):
        env.reset(seed=seed + ep)
        for i, a in enumerate(env.possible_agents):  # the draws seeded too: the same episodes in every run
            env.action_space(a).seed(1000 * (seed + ep) + i)
        total, done = 0.0, False
        while not done:
            acts = {a: env.action_space(a).sample() for a in env.agents}
            _, rew, term, trunc, _ = env.step(acts)
            total += sum(rew.values())
            done = not env.agents or all(term[a] or trunc[a] for a in term)
        out.append(total)
    env.close()
    return out


def iteration_se(rows: list[dict]) -> float:
    """Standard error of the mean return over `rows`, from the spread of the means of the iterations where
    episodes ended (the 8 env copies end theirs together: one such iteration is one wave of 8 episodes)."""
    means = [r["return"] for r in rows if r["episodes"]]
    return float(np.std(means, ddof=1) / np.sqrt(len(means))) if len(means) > 1 else float("nan")


def episode_mean(rows: list[dict]) -> tuple[float, int]:
    """Mean return of the episodes that finished in `rows` (each iteration's mean weighted by its episodes)."""
    n = sum(r["episodes"] for r in rows)
    return (sum(r["return"] * r["episodes"] for r in rows if r["episodes"]) / n if n else float("nan")), n


def defaults_main(args) -> None:
    print(f"images benchmark, PPO defaults on full Pistonball: {C.machine_line()}")
    rows = []
    for side, iterations in (("before", args.before_iterations), ("after", args.iterations)):
        res = run_child(args, "train", side, iterations)
        last = res["rows"][1:] or res["rows"]  # the first iteration also pays warm-up, where there are more
        rows.append([side, json.dumps(res["wrappers"]), f"{res['training']['num_epochs']} x {res['training']['minibatch_size']}",
                     f"{C.median([r['time_s'] for r in last]):.1f}", f"{C.median([r.get('sample_time_s', 0) for r in last]):.1f}",
                     f"{C.median([r.get('learn_time_s', 0) for r in last]):.1f}", f"{res['peak_mb']:,.0f}"])
        print(f"  {side}: {res['rows']}", flush=True)
    C.print_table(["side", "wrappers", "epochs x minibatch", "s/iteration", "sample s", "learn s", "peak RSS MB"], rows,
                  f"PPO on {PISTONBALL} (20 pistons, 4,096 agent steps an iteration), fresh process per side; "
                  f"median over the iterations after the first (before: its one iteration, {args.before_iterations} run)")


def run_rows(run_dir: Path, max_env_steps: int | None = None) -> dict:
    """A `marl train` run directory's iterations as `train_child`'s rows (resumed runs included: result.jsonl keeps
    every iteration). Only its algorithm and env are checked: that it ran the defaults otherwise (no overrides but
    seed, stop and checkpointing) is the caller's to keep. Wall time is the iterations' own; peak RSS is not in a run
    directory (`--peak-mb`)."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    if config.get("algo") != "PPO" or config["environment"]["env"] != PISTONBALL:
        raise SystemExit(f"{run_dir}: not PPO on {PISTONBALL}")
    rows = [{"time_s": r["time_this_iter_s"], "return": r["episode_return_mean"], "episodes": r.get("episodes_this_iter", 0),
             "env_steps": r["env_steps_total"]} for r in map(json.loads, (run_dir / "result.jsonl").read_text().splitlines())
            if max_env_steps is None or r["env_steps_total"] <= max_env_steps]
    return {"rows": rows, "wall_s": sum(r["time_s"] for r in rows)}


def learn_main(args) -> None:
    print(f"images benchmark, PPO defaults learning full Pistonball: {C.machine_line()}")
    rand = random_returns(args.random_episodes)  # first: a training run cut short by --max-minutes still compares
    sem = float(np.std(rand) / np.sqrt(len(rand)))
    print(f"random actions, {len(rand)} episodes: {np.mean(rand):.1f} +- {sem:.1f} (s.e.)", flush=True)
    t0 = time.perf_counter()
    if args.from_run:
        res = run_rows(Path(args.from_run), args.max_env_steps)
        res["peak_mb"], wall = args.peak_mb, res["wall_s"]
    else:
        res = run_child(args, "train", "after", args.learn, progress=True)
        wall = time.perf_counter() - t0
    rows = res["rows"]
    k = max(1, len(rows) // 4)
    first, n_first = episode_mean(rows[:k])
    last, n_last = episode_mean(rows[-k:])
    curve = []
    for i in range(0, len(rows), k):
        block_mean, block_episodes = episode_mean(rows[i:i + k])
        curve.append([f"{i + 1}-{min(i + k, len(rows))}", block_episodes, f"{block_mean:.1f}",
                      f"{C.median([r['time_s'] for r in rows[i:i + k]]):.1f}"])
    C.print_table(["iterations", "episodes", "mean return", "median s/iteration"], curve,
                  f"learning curve: PPO defaults on {PISTONBALL}, blocks of {k} iterations")
    margin, last_se = last - np.mean(rand), iteration_se(rows[-k:])
    C.print_table(["policy", "episodes", "mean return (20 pistons summed)", "s.e."],
                  [["random actions", len(rand), f"{np.mean(rand):.1f}", f"{sem:.1f}"],
                   [f"PPO defaults, iterations 1-{k}", n_first, f"{first:.1f}", f"{iteration_se(rows[:k]):.1f}"],
                   [f"PPO defaults, iterations {len(rows) - k + 1}-{len(rows)}", n_last, f"{last:.1f}", f"{last_se:.1f}"],
                   ["margin: last - random", "", f"{margin:+.1f}",
                    f"{np.hypot(sem, last_se):.1f} ({margin / sem:+.1f} s.e. of the random mean)"]],
                  f"{rows[-1]['env_steps']:,} env steps in {len(rows)} iterations, {wall:.0f} s wall, "
                  f"median {C.median([r['time_s'] for r in rows]):.1f} s/iteration, peak RSS {res['peak_mb']:,.0f} MB")


class ConversionLoop:
    """Full Pistonball (20 pistons, its default continuous actions) stepped with random actions through PettingZoo's AEC-to-parallel
    conversion: upstream's, or marl's `ObserveOnceConversion` (each agent observed once a step)."""

    def __init__(self, observe_once: bool, resize: int | None, seed: int = 0) -> None:
        import supersuit
        from pettingzoo.butterfly import pistonball_v6

        from marl.envs.pettingzoo_conversion import observing_once

        env = pistonball_v6.parallel_env()
        if resize:
            env = supersuit.resize_v1(env, x_size=resize, y_size=resize)
        self.env = observing_once(env) if observe_once else env
        self.rng, self.episode = np.random.default_rng(seed), seed
        self.env.reset(seed=seed)

    def run(self, steps: int) -> int:
        env = self.env
        for _ in range(steps):
            if not env.agents:
                self.episode += 1
                env.reset(seed=self.episode)
            env.step({a: self.rng.uniform(-1, 1, 1).astype(np.float32) for a in env.agents})  # Box(-1, 1, (1,))
        return steps


def conversion_main(args) -> None:
    print(f"images benchmark, PettingZoo's conversion: upstream vs observing once: {C.machine_line()}")
    rows = []
    for resize in (None, 42):
        loops = {side: ConversionLoop(side == "observe once", resize) for side in ("upstream", "observe once")}
        rates = {side: [] for side in loops}
        for repeat in range(args.repeats):
            for side in (list(loops) if repeat % 2 == 0 else list(loops)[::-1]):  # the order alternates
                steps, elapsed = C.run_for(args.seconds, lambda: loops[side].run(10))
                rates[side].append(steps / elapsed)
        ratios = [b / a for a, b in zip(rates["upstream"], rates["observe once"])]
        frames = f"resized to {resize}x{resize} (SuperSuit resize_v1, the defaults' wrappers)" if resize else "457x120x3 (raw)"
        rows.append([frames, C.fmt_num(C.median(rates["upstream"])), C.spread(rates["upstream"]),
                     C.fmt_num(C.median(rates["observe once"])), C.spread(rates["observe once"]),
                     f"{C.median(ratios):.2f}", C.spread(ratios)])
        print(f"  {frames}: {rates}", flush=True)
    C.print_table(["observations", "upstream env steps/s", "spread", "observe once env steps/s", "spread",
                   "ratio (median)", "spread"], rows,
                  f"full {PISTONBALL} (20 pistons), random actions, one process; {args.repeats} repeats of "
                  f"{args.seconds:g} s per side, interleaved (order alternating); medians")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--fragment", type=int, default=32)
    ap.add_argument("--size", type=int, default=32, help="frames are size x size x 3 (default 32)")
    ap.add_argument("--pistons", type=int, default=6)
    ap.add_argument("--defaults", action="store_true", help="PPO's defaults on full Pistonball, before vs after image defaults")
    ap.add_argument("--iterations", type=int, default=3, help="--defaults: iterations of the after side")
    ap.add_argument("--before-iterations", type=int, default=1, help="--defaults: iterations of the before side (minutes each)")
    ap.add_argument("--conversion", action="store_true",
                    help="full Pistonball's env steps/s through PettingZoo's conversion vs marl's ObserveOnceConversion")
    ap.add_argument("--learn", type=int, default=0, help="train the defaults this many iterations against random")
    ap.add_argument("--from-run", metavar="RUN_DIR", help="--learn: read the iterations of a finished `marl train --algo PPO --env "
                    f"{PISTONBALL}` run (a resumable, hours-long one) instead of training here")
    ap.add_argument("--max-env-steps", type=int, help="--from-run: only the iterations up to this many env steps (the "
                    "same budget for runs stopped at different points)")
    ap.add_argument("--peak-mb", type=float, default=float("nan"), help="--from-run: the training process's peak RSS (its VmHWM)")
    ap.add_argument("--random-episodes", type=int, default=30)
    ap.add_argument("--max-minutes", type=float, default=None, help="--learn: stop training after the iteration that passes this")
    ap.add_argument("--child", choices=["random", "marl", "train"], help=argparse.SUPPRESS)
    ap.add_argument("--side", choices=["before", "after"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "train":
        train_child(args.side, args.iterations, args.max_minutes)
        return
    if args.child:
        child(args)
        return
    if args.defaults:
        defaults_main(args)
        return
    if args.conversion:
        conversion_main(args)
        return
    if args.learn or args.from_run:
        learn_main(args)
        return
    print(f"images benchmark: {C.machine_line()}")
    print(f"pistonball_v6, {args.pistons} pistons, grey {args.size}x{args.size} frames, 3 stacked (uint8); "
          f"{args.envs} env copies, fragment {args.fragment}")
    t0 = time.perf_counter()
    C.print_table(["stored as", "obs", "obs B/row", "obs+next_obs B/row", "all columns B/row", "rows per GB", "sample payload B/row"], frame_memory(args),
                  "memory per stored frame (DQN replay rows)")
    print("\nenv steps/s (interleaved):", flush=True)
    raw, ours = rates(args)
    ratios = [b / a for a, b in zip(raw, ours)]
    C.print_table(["side", "env steps/s (median)", "spread"],
                  [["random-action loop (raw env)", C.fmt_num(C.median(raw)), C.spread(raw)],
                   ["marl runner, conv module", C.fmt_num(C.median(ours)), C.spread(ours)],
                   ["ratio marl / raw", f"{C.median(ratios):.3f}", C.spread(ratios)]])
    peaks = [[mode, f"{r['peak_mb']:.0f}", C.fmt_num(r["steps_per_s"])] for mode in ("random", "marl") for r in [peak_child(args, mode)]]
    C.print_table(["fresh process", "peak RSS MB", "env steps/s"], peaks, "peak memory (VmHWM of a fresh process; both import marl and torch)")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; the machine is shared: figures vary 10-25 % between runs")


if __name__ == "__main__":
    main()
