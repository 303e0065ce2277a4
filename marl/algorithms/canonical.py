"""The task on which an algorithm's defaults must learn: declared by each algorithm's config class.

    class PPOConfig(AlgorithmConfig):
        canonical_tasks = (CanonicalTask("CartPole-v1", threshold=450, budget=150_000, ...),)

`tests/test_defaults_learn.py` runs every registered algorithm on each task it declares
exactly as `marl train --algo NAME --env ENV [overrides]` would, with nothing else set,
and fails for an algorithm that declares none (`canonical_tasks` on its own class, not
inherited). `overrides` may only say what a user must say on the command line to pose
the task (an env option, the policies of a MIXED run), never tuning: the point is that the
defaults a user's first try gets are the ones that learn.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CanonicalTask:
    env: str  # environment.env, as `marl train --env` takes it
    threshold: float  # the score the defaults must reach (see `metric`)
    budget: int  # env steps sampled (online); train() iterations (offline, `data` set)
    overrides: tuple[str, ...] = ()  # key=value settings that pose the task (env_config, policies), no tuning
    # online: a key of train()'s result; the run passes when it first reaches `threshold` within `budget`
    metric: str = "episode_return_mean"
    window: int = 1  # online: iterations the metric is averaged over (noisy multi-agent returns)
    # online: env steps the run goes on to once it reached the threshold (0: it stops there); the metric averaged
    # over its last `hold_window` iterations must still reach `hold_threshold` (None: the threshold), so learning
    # that peaks and falls back (a diverging target, a growing value loss) fails
    hold: int = 0
    hold_window: int = 10
    hold_threshold: float | None = None
    # offline: the recording `offline.input` reads (a recipe the defaults test records); the run passes when the
    # greedy return reaches `threshold` at every 10th iteration of the budget's second half and at its end
    data: str | None = None
    seeds: tuple[int, ...] = (1,)  # debugging.seed of each run; every seed must pass
    measured: str = ""  # what the defaults reached when the threshold was set (margin, env steps, wall time)
