"""Many agents: marl's sampling rate and memory per agent row against each env's own random-action rate.

    .venv/bin/python benchmarks/speed/many_agents.py [--seconds 5] [--agents 10,100,1000,10000] [--skip-magent]

Each case runs in its own process (so its peak memory is its own):

1. the raw env stepped with random actions (drawn in one vectorised call per step,
   the cheapest a caller can do), agent steps/s;
2. marl's in-process EnvRunner on the same env (PPO's columns: log-probs, values,
   bootstraps; one env copy, fragments of about 8,192 agent rows), agent steps/s,
   and that as a fraction of (1): what marl costs on top of the env;
Rates are per second of the process's CPU time (`time.process_time`; torch runs one
thread in runners): the machine is shared, and wall-clock rates there measure the load.

3. the bytes one `sample()` call allocates at its peak (tracemalloc) per agent row
   it returns, next to the bytes of one row's observation, and the process's peak RSS.

Envs: `many_agents` (marl/envs/many_agents.py: 16-float observations, every
agent acting every step, cost per agent tiny, so marl's own per-agent cost shows)
at 10, 100, 1,000 and 10,000 agents; MAgent2 `battle_v4` at map sizes giving about
the same agent counts (13x13x5 observations), and `gather_v5` (495 agents, 15x15x5).
The per-agent cost ratio (100 -> 10,000 agents) is marl's time per agent step at
10,000 agents over that at 100.

A last part trains one iteration of `marl train --algo PPO` and `--algo MAPPO` on
MAgent2 battle (162 agents) with default settings and reports the wall time and
the process's peak RSS of each (MAPPO stores the global state once per env step).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchmarks/: the shared helpers (_common)
ROWS_PER_CALL = 8192
BATTLE = "magent2.environments.battle_v4"
GATHER = "magent2.environments.gather_v5"
# map_size -> agents of battle_v4 (both teams): 12 -> 8 ... see table; about 0.08 x map_size^2
BATTLE_MAPS = {10: 12, 100: 36, 1000: 112, 10000: 354}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def make_case(kind: str, agents: int):
    """(env name, env_config) of a case."""
    if kind == "synthetic":
        importlib.import_module("marl.envs.many_agents")  # registers `many_agents`

        return "many_agents", {"num_agents": agents, "obs_dim": 16, "num_actions": 5, "episode_length": 200}
    if kind == "battle":
        return BATTLE, {"map_size": BATTLE_MAPS.get(agents, agents)}
    return GATHER, {}


def raw_rate(env_name: str, env_config: dict, seconds: float) -> tuple[float, int]:
    """Agent steps/s of the env alone with random actions; (rate, number of agents)."""
    if env_name == "many_agents":
        from marl.envs.many_agents import ManyAgentsEnv

        env = ManyAgentsEnv(**env_config)
        reset = lambda: env.reset(seed=0)[0]  # noqa: E731
        agents_of = lambda obs: list(obs)  # noqa: E731
        n_actions = env.num_actions
    else:
        env = importlib.import_module(env_name).parallel_env(**env_config)
        reset = lambda: env.reset(seed=0)[0]  # noqa: E731
        agents_of = lambda obs: env.agents  # noqa: E731
        n_actions = env.action_space(env.possible_agents[0]).n
    rng = np.random.default_rng(0)
    obs = reset()
    num_agents = len(agents_of(obs))
    steps, t0 = 0, time.process_time()
    while time.process_time() - t0 < seconds:
        agents = agents_of(obs)
        actions = dict(zip(agents, rng.integers(0, n_actions, len(agents)).tolist()))
        obs, _, terms, truncs, _ = env.step(actions)
        steps += len(actions)
        if not agents_of(obs) or terms.get("__all__") or (terms and all(terms.values())):
            obs = reset()
    return steps / (time.process_time() - t0), num_agents


def runner_case(kind: str, agents: int, seconds: float) -> dict:
    from marl.algorithms.ppo.config import PPOConfig
    from marl.envs.registry import registered_creator
    from marl.runners import EnvRunner

    env_name, env_config = make_case(kind, agents)
    raw, num_agents = raw_rate(env_name, env_config, seconds)
    cfg = PPOConfig().environment(env_name, env_config=env_config)
    fragment = max(1, ROWS_PER_CALL // num_agents)
    cfg.env_runners(num_envs_per_env_runner=1, rollout_fragment_length=fragment)
    cfg.training(train_batch_size=max(ROWS_PER_CALL, fragment * num_agents))
    cfg.debugging(seed=0)
    cfg.validate()
    cfg.env_creator = registered_creator(env_name)
    rss0 = peak_rss_mb()
    runner = EnvRunner(cfg)
    runner.sample()  # warm-up: first reset, allocations
    rows, t0 = 0, time.process_time()
    while time.process_time() - t0 < seconds:
        rows += runner.sample().batch.agent_steps()
    rate = rows / (time.process_time() - t0)
    tracemalloc.start()
    batch = runner.sample().batch
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    n_rows = batch.agent_steps()
    obs_bytes = next(iter(batch.policy_batches.values()))["obs"][0].nbytes
    runner.stop()
    return {
        "env": kind, "agents": num_agents, "raw": raw, "marl": rate, "fraction": rate / raw,
        "us_per_agent_step": 1e6 / rate, "sample_peak_bytes_per_row": peak / n_rows, "obs_bytes": obs_bytes,
        "rows_per_call": n_rows, "peak_rss_mb": peak_rss_mb(), "rss_before_runner_mb": rss0,
    }


def train_case(algo: str) -> dict:
    """One `train()` iteration of ALGO's defaults on MAgent2 battle (162 agents): seconds and peak RSS."""
    from marl.config.registry import discovered

    t0 = time.perf_counter()
    algo_obj = discovered()[algo]().environment(BATTLE).debugging(seed=0).build()
    built, cpu0 = time.perf_counter(), time.process_time()
    result = algo_obj.train()
    done, cpu = time.perf_counter(), time.process_time() - cpu0
    algo_obj.stop()
    return {
        "algo": algo, "build_s": built - t0, "iteration_s": done - built, "iteration_cpu_s": cpu, "peak_rss_mb": peak_rss_mb(),
        "agent_steps": result.get("agent_steps_total"), "env_steps": result.get("env_steps_total"),
    }


def in_subprocess(args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--agents", default="10,100,1000,10000")
    parser.add_argument("--skip-magent", action="store_true")
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument("--case", nargs=2, metavar=("KIND", "AGENTS"), help=argparse.SUPPRESS)
    parser.add_argument("--train", metavar="ALGO", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(runner_case(args.case[0], int(args.case[1]), args.seconds)))
        return
    if args.train:
        print(json.dumps(train_case(args.train)))
        return

    import _common as C

    print(f"# many_agents.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {C.machine_line()}")
    counts = [int(a) for a in args.agents.split(",")]
    cases = [("synthetic", n) for n in counts]
    if not args.skip_magent:
        cases += [("battle", n) for n in counts] + [("gather", 495)]
    results = []
    for kind, n in cases:
        r = in_subprocess(["--case", kind, str(n), "--seconds", str(args.seconds)])
        r.setdefault("env", kind)
        results.append(r)
        print(json.dumps(r), flush=True)
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["env"], "-", "error: " + r["error"][:60], "", "", "", "", ""])
            continue
        rows.append([
            r["env"], r["agents"], C.fmt_num(r["raw"]), C.fmt_num(r["marl"]), f"{r['fraction']:.2f}",
            f"{r['us_per_agent_step']:.2f}", f"{r['sample_peak_bytes_per_row']:.0f} ({r['obs_bytes']})",
            f"{r['peak_rss_mb']:.0f}",
        ])
    C.print_table(
        ["env", "agents", "raw env agent steps/s", "marl agent steps/s", "marl/raw", "us per agent step",
         "sample() peak bytes/row (obs bytes)", "peak RSS MB"], rows, "Sampling, in-process runner, 1 env copy",
    )
    for kind in ("synthetic", "battle"):
        by_n = {r["agents"]: r for r in results if r.get("env") == kind and "error" not in r}
        small = min((n for n in by_n if n >= 90), default=None)
        big = max(by_n, default=None)
        if small is not None and big is not None and big > small:
            ratio = by_n[big]["us_per_agent_step"] / by_n[small]["us_per_agent_step"]
            print(f"{kind}: per-agent cost {small} -> {big} agents: x{ratio:.2f} (marl/raw {by_n[small]['fraction']:.2f} -> {by_n[big]['fraction']:.2f})")
    if not args.skip_train and not args.skip_magent:
        train = [in_subprocess(["--train", algo]) for algo in ("PPO", "MAPPO")]
        C.print_table(
            ["algo", "build s", "first iteration s (wall)", "(CPU)", "agent steps", "peak RSS MB"],
            [[t.get("algo", "?"), f"{t.get('build_s', float('nan')):.1f}", f"{t.get('iteration_s', float('nan')):.1f}",
              f"{t.get('iteration_cpu_s', float('nan')):.1f}",
              t.get("agent_steps", t.get("error", "")), f"{t.get('peak_rss_mb', float('nan')):.0f}"] for t in train],
            "MAgent2 battle_v4 (162 agents), default settings, one train() iteration",
        )
        if all("peak_rss_mb" in t for t in train):
            print(f"MAPPO/PPO peak RSS: x{train[1]['peak_rss_mb'] / train[0]['peak_rss_mb']:.2f}")


if __name__ == "__main__":
    main()
