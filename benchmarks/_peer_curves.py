"""Side-by-side runs of marl and a peer's own script, per update: curves at equal env steps, windows, the marl-eval
JSON and the tables (compare_jaxmarl_pqn.py and jaxmarl_regression.py).

A run is a row: {"side", "seed", "returns": [per update or iteration], ...}. A peer's row (JaxMARL's, written by
jaxmarl_baseline.py) has "env_steps_per_update" and its updates are equal; marl's row has "steps" (env steps at
the end of each iteration). Peer scripts that average their logged return over every world, finished episode or
not (JaxMARL's IPPO-FF and QLearning scripts: MPELogWrapper's `returned_episode_returns` is 0 until a world's first
episode ends), bias their leading updates toward 0: those updates, before the first whose mean episode length is
full, are dropped (NaN).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import _common as C

def add_side_by_side_arguments(parser: argparse.ArgumentParser, raw_dir: Path) -> None:
    """The options every script running JaxMARL's side beside marl's takes."""
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="threads per side (XLA's and marl's learner)")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    parser.add_argument("--jaxmarl-venv", default=str(Path(__file__).resolve().parent / ".jaxmarl-venv"))
    parser.add_argument("--jaxmarl-src", help="the JaxMARL checkout (default: the one the venv names)")
    parser.add_argument("--raw-dir", default=str(raw_dir), help="each run's output; a run whose file is there is read, not rerun")
    parser.add_argument("--json", help="write the marl-eval JSON here")
    parser.add_argument("--report", help="marl report the JSON into this directory (needs --json)")


def train_to_budget(algo, budget: int, started: float, columns: dict[str, str]) -> dict:
    """Trains marl's `algo` until `budget` env steps: per iteration its env steps (`steps`) and, under each name of
    `columns`, that result key's value (NaN where absent). The first iteration is start-up (it compiles the JaxMARL
    step or rollout, as JaxMARL's compile is its start-up): `startup_s` from `started` (the process's start) to its
    end; `train_s`, `cpu_s`, `sample_s`, `learn_s` and `timed_env_steps` count the iterations after it."""
    steps, values, first = [], {name: [] for name in columns}, None
    sample_s = learn_s = 0.0
    while not steps or steps[-1] < budget:
        result = algo.train()
        if first is None:
            first, first_steps, cpu = time.time(), int(result["env_steps_total"]), time.process_time()
        else:
            sample_s += result["perf/sample_time_s"]
            learn_s += result["perf/learn_time_s"]
        steps.append(int(result["env_steps_total"]))
        for name, key in columns.items():
            values[name].append(float(result.get(key, float("nan"))))
    done, cpu = time.time(), time.process_time() - cpu
    return {"startup_s": first - started, "train_s": done - first, "cpu_s": cpu, "env_steps": steps[-1],
            "timed_env_steps": steps[-1] - first_steps, "steps": steps, **values, "sample_s": sample_s, "learn_s": learn_s}


WINDOW = 0.1  # the score: the mean over the last 10 % of the budget (and before each point of the tables)
POINTS = (0.25, 0.5, 0.75, 1.0)


def episode_lengths(row: dict):
    return row.get("lengths") or row.get("logged", {}).get("returned_episode_lengths")


def curve(row: dict) -> tuple[np.ndarray, np.ndarray]:
    """(env steps at each update's end, its return), NaN where none is measured."""
    returns = np.asarray(row["returns"], dtype=float)
    if "steps" in row:  # marl: the iteration's episodes
        return np.asarray(row["steps"]), returns
    steps = row["env_steps_per_update"] * np.arange(1, len(returns) + 1)
    lengths = episode_lengths(row)
    if lengths is not None:
        lengths = np.asarray(lengths, dtype=float)
        full = lengths >= 0.999 * np.nanmax(lengths)
        returns[: int(np.argmax(full))] = np.nan
    return steps, returns


def window_mean(row: dict, lo: float, hi: float) -> float:
    steps, returns = curve(row)
    values = returns[(steps > lo) & (steps <= hi) & ~np.isnan(returns)]
    return float(values.mean()) if len(values) else float("nan")


def marl_eval(rows: list[dict], budget: int, bin_steps: int, place) -> dict:
    """The runs in marl-eval's layout: a step per bin of `bin_steps` env steps, the score the last 10 %.
    `place(row)` -> (environment, task, algorithm) names the row's entry."""
    out: dict = {}
    for row in rows:
        steps, returns = curve(row)
        entry = {}
        for k, hi in enumerate(range(bin_steps, int(steps[-1]) + bin_steps, bin_steps)):
            hi = min(hi, int(steps[-1]))
            keep = (steps > hi - bin_steps) & (steps <= hi) & ~np.isnan(returns)
            if keep.any():
                entry[f"step_{k}"] = {"step_count": hi, "return": returns[keep].tolist()}
        last = (steps > (1 - WINDOW) * budget) & ~np.isnan(returns)
        entry["absolute_metrics"] = {"return": returns[last].tolist()}
        env, task, algorithm = place(row)
        out.setdefault(env, {}).setdefault(task, {}).setdefault(algorithm, {})[f"seed_{row['seed']}"] = entry
    return out


def tables(rows: list[dict], budget: int, reps: int, label=lambda row: row["side"], what: str = "return") -> None:
    """The score at 25/50/75/100 % of the budget per run, with the IQM over seeds [95 % CI]; the time per run."""
    from rliable import metrics

    header = [f"{what} at {int(p * 100)} % ({int(p * budget):,})" for p in POINTS]
    body = []
    for side in dict.fromkeys(label(r) for r in rows):
        ours = sorted((r for r in rows if label(r) == side), key=lambda r: r["seed"])
        scores = np.array([[window_mean(r, (p - WINDOW) * budget, p * budget) for p in POINTS] for r in ours])
        body += [[side, f"seed {r['seed']}", *(f"{v:.2f}" for v in s)] for r, s in zip(ours, scores)]
        if len(ours) > 1:
            body.append([side, f"IQM of {len(ours)} [95 % CI]", *C.estimate_cells(scores, metrics.aggregate_iqm, reps)])
    C.print_table(["side", "run", *header], body,
                  title=f"training {what} (mean of the per-update values over the 10 % of the budget before each point)")
    speed = []
    for r in sorted(rows, key=lambda r: (label(r), r["seed"])):
        timed = r.get("timed_env_steps", r["env_steps"])  # a peer's training time holds every update (compile apart)
        speed.append([label(r), r["seed"], f"{r['env_steps']:,}", f"{r['startup_s'] + r['train_s']:.0f} s",
                      f"{r['startup_s']:.1f} s", f"{r['train_s']:.0f} s",
                      f"{timed / r['train_s']:,.0f}", f"{timed / r['cpu_s']:,.0f}", f"{r['cpu_s'] / r['train_s']:.2f}"])
    C.print_table(["side", "seed", "env steps", "wall (start to end of training)", "start-up", "training",
                   "env steps/s after start-up", "per CPU-second", "CPU-s per s"], speed,
                  title="time per run (one thread per side; CPU-s per s below 1: the machine's other load took the rest)")
