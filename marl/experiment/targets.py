"""A suite's `targets:` rows: (task, algorithm) pairs that train until a return or their own budget.

    targets:
      cartpole_2:                        # a task of the suite
        PPO:                             # an algorithm of the suite
          episode_return_mean: 800       # stop once the training return reaches it ...
          episode_return_window: 100     # ... averaged over the last 100 episodes (RLlib's rule; 0: the iteration's episodes)
          env_steps: 150000              # this row's budget (default: the suite's env_steps)
          reference_env_steps: 300000    # where the target comes from, for the report (optional)
          reference: "RLlib tuned_examples/ppo/multi_agent_cartpole_ppo.py"

With `targets`, a suite runs exactly the listed pairs (not the whole task x algorithm grid); a run
is finished when it reached its target or its budget. `marl report` adds a table of each row's
target, budgets and env steps to target per seed.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from marl.errors import ConfigError

TARGET_KEYS = ("episode_return_mean", "episode_return_window", "env_steps", "reference_env_steps", "reference")


@dataclasses.dataclass(frozen=True)
class Target:
    episode_return_mean: float | None
    env_steps: int
    reference_env_steps: int | None = None
    reference: str = ""
    episode_return_window: int = 0


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} must be a number, got {value!r}")
    return float(value)


def _steps(value, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where} must be an integer >= {minimum}, got {value!r}")
    return value


def parse_targets(data, tasks: dict, algorithms: dict, default_env_steps: int, where: str) -> dict[tuple[str, str], Target]:
    """(task, algorithm) -> Target, checked against the suite's tasks and algorithms."""
    if data is None:
        return {}
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{where}: 'targets' must map tasks to {{algorithm: {{episode_return_mean, env_steps}}}}, got {data!r}")
    out = {}
    for task, rows in data.items():
        if task not in tasks:
            raise ConfigError(f"{where}: 'targets' names task '{task}', which is not in 'tasks' {list(tasks)}")
        if not isinstance(rows, dict) or not rows:
            raise ConfigError(f"{where}: 'targets.{task}' must map algorithms to their targets, got {rows!r}")
        for algorithm, spec in rows.items():
            key = f"targets.{task}.{algorithm}"
            w = f"{where}: '{key}'"
            if algorithm not in algorithms:
                raise ConfigError(f"{w}: '{algorithm}' is not in 'algorithms' {list(algorithms)}")
            if not isinstance(spec, dict):
                raise ConfigError(f"{w} must be a mapping with keys {list(TARGET_KEYS)}, got {spec!r}")
            unknown = [k for k in spec if k not in TARGET_KEYS]
            if unknown:
                raise ConfigError(f"{w}: unknown key '{unknown[0]}'; valid keys: {list(TARGET_KEYS)}")
            if "episode_return_mean" not in spec:
                raise ConfigError(f"{w}: 'episode_return_mean' is required")
            reference_steps = spec.get("reference_env_steps")
            out[(task, algorithm)] = Target(
                _number(spec["episode_return_mean"], f"{where}: '{key}.episode_return_mean'"),
                _steps(spec.get("env_steps", default_env_steps), f"{where}: '{key}.env_steps'"),
                None if reference_steps is None else _steps(reference_steps, f"{where}: '{key}.reference_env_steps'"),
                str(spec.get("reference", "")),
                _steps(spec.get("episode_return_window", 0), f"{where}: '{key}.episode_return_window'", 0),
            )
    return out


def steps_to_target(rows: list[dict], target: float, window: int = 0) -> tuple[int | None, float | None]:
    """(env steps at the first iteration whose training return (over the last `window` episodes, or the iteration's
    with 0) reached `target`, or None; the best such return)."""
    best = None
    for row in rows:
        value = row.get("episode_return_window_mean" if window else "episode_return_mean")
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        best = value if best is None else max(best, value)
        if value >= target:
            return int(row["env_steps_total"]), best
    return None, best


def targets_markdown(targets: dict, reached: dict) -> list[str]:
    """The report's table: one line per target row; `reached[(task, algorithm)]` = {seed: (steps or None, best)}."""
    lines = ["## Targets (training return, as RLlib's stop criterion reads it)", "",
             "| task | algorithm | target | over episodes | reference budget | budget | env steps to target per seed | met |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (task, algorithm), target in targets.items():
        seeds = reached.get((task, algorithm), {})
        cells = [f"seed {s}: {steps:,}" if steps is not None else f"seed {s}: missed (best {best if best is None else round(best, 1)})"
                 for s, (steps, best) in sorted(seeds.items())]
        met = "yes" if seeds and all(steps is not None for steps, _ in seeds.values()) else "no"
        reference = f"{target.reference_env_steps:,}" if target.reference_env_steps else "-"
        over = f"last {target.episode_return_window}" if target.episode_return_window else "iteration's"
        lines.append(f"| {task} | {algorithm} | {target.episode_return_mean:g} | {over} | {reference} | {target.env_steps:,} | "
                     f"{'; '.join(cells) or 'no finished run'} | {met} |")
    sources = [f"- {task}/{algorithm}: {t.reference}" for (task, algorithm), t in targets.items() if t.reference]
    return lines + ([""] + ["Sources:"] + sources if sources else []) + [""]


def suite_targets(suite: dict) -> dict[tuple[str, str], Target]:
    """The targets of a saved suite.yaml (as `marl experiment` wrote it), or {}."""
    if not suite.get("targets"):
        return {}
    algorithms = suite.get("algorithms") or {}
    algorithms = {a: {} for a in algorithms} if isinstance(algorithms, list) else algorithms
    return parse_targets(suite["targets"], suite.get("tasks") or {}, algorithms, int(suite.get("env_steps", 1)), "suite.yaml")


def targets_report(runs_dir, suite: dict, read_rows) -> tuple[list[str], list[dict]]:
    """(markdown lines, JSON rows) of the targets table; `read_rows(run_dir)` gives a run's result rows."""
    targets = suite_targets(suite)
    reached, rows_out = {}, []
    for (task, algorithm), target in targets.items():
        seeds = {}
        for run_dir in sorted(Path(runs_dir).glob(f"{task}/{algorithm}/seed_*")):
            if (run_dir / "done.json").is_file():
                seeds[int(run_dir.name.split("_")[1])] = steps_to_target(read_rows(run_dir), target.episode_return_mean,
                                                                               target.episode_return_window)
        reached[(task, algorithm)] = seeds
        rows_out.append({"task": task, "algorithm": algorithm, **dataclasses.asdict(target),
                         "env_steps_to_target": {str(s): v[0] for s, v in seeds.items()},
                         "best_training_return": {str(s): v[1] for s, v in seeds.items()}})
    return (targets_markdown(targets, reached) if targets else []), rows_out
