"""One run of an algorithm's defaults on a canonical task, as `marl train --algo NAME --env ENV` would start it.

`tests/test_defaults_learn*.py` judge every registered algorithm with it (the task's own `hold`), and
`benchmarks/studies/defaults_hold.py` asks every online task to hold for longer than CI can afford.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from marl.algorithms import config_from_dict
from marl.algorithms.canonical import CanonicalTask


def window_mean(values) -> float:
    """The mean of a window of iterations' metric values, skipping NaN ones: an iteration in which no episode
    finished (long episodes, few env copies) says nothing about the policy. NaN if none finished."""
    known = [v for v in values if not math.isnan(v)]
    return float(np.mean(known)) if known else math.nan


@dataclass
class CanonicalRun:
    reached: float  # the metric (averaged over the task's window) when it first reached the threshold, else at the budget
    steps: int  # env steps sampled by then
    held: float | None = None  # the metric over the last `hold_window` iterations of the hold; None: no hold asked or reached
    curve: list[tuple[int, float]] = field(default_factory=list)  # (env_steps_total, metric) of every iteration


def run_canonical(name: str, task: CanonicalTask, seed: int, hold: int | None = None) -> CanonicalRun:
    """Trains until the metric (averaged over `task.window` iterations) first reaches the threshold, else to the
    budget; where a hold is asked (`hold`, else the task's own) and the threshold was reached, it goes on to
    `hold` env steps and `held` is the metric averaged over its last `task.hold_window` iterations."""
    hold = task.hold if hold is None else hold
    overrides = [*task.overrides, f"debugging.seed={seed}"]
    algo = config_from_dict({"algo": name, "environment": {"env": task.env}}, overrides).build()
    run = CanonicalRun(math.nan, 0)

    def step() -> dict:
        result = algo.train()
        run.curve.append((int(result["env_steps_total"]), float(result[task.metric])))
        return result

    def mean_of_last(k: int) -> float:
        return window_mean(metric for _, metric in run.curve[-k:])

    try:
        while True:
            result = step()
            score = mean_of_last(task.window) if len(run.curve) >= task.window else math.nan
            if (not math.isnan(score) and score >= task.threshold) or result["env_steps_total"] >= task.budget:
                break
        run.reached, run.steps = score, int(result["env_steps_total"])
        if not hold or not run.reached >= task.threshold:
            return run
        while result["env_steps_total"] < hold:
            result = step()
        run.held = mean_of_last(task.hold_window)
        return run
    finally:
        algo.stop()
