"""What `marl report` aggregates: runs read from `marl experiment`'s runs directories and from marl-eval JSON files.

A run is one (task, algorithm, seed): its curve (mean return at each evaluation's env steps), its score (the final
greedy evaluation's mean return; with score="training", the exploring policy's training returns instead: the curve
every iteration's, the score their mean over the last 10 % of the run, as peers that report training curves do) and
the per-episode lists the marl-eval JSON keeps. Two sources give runs:

* a runs directory (`*/*/seed_*/run.json`, `result.jsonl`, `done.json`): every evaluation, as trained;
* a marl-eval JSON file (environment -> task -> algorithm -> seed_N -> step_K {step_count, return: [...],
  episode_length: [...]}, absolute_metrics {...}): a committed report's `marl_eval.json`, or another library's
  (BenchMARL writes this layout). Its curve is the steps it kept (a report keeps `--points` of them), so a
  report's runs can be merged with new ones after the run directories are gone, and a peer's runs drawn in
  the same tables and plots.

Algorithm names from JSON (lower case there) take the casing of the same name in a runs directory, else upper case.
A run given by two sources is refused (one line naming both), never chosen silently.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from marl.errors import ConfigError
from marl.experiment.runner import DONE_FILE, RUN_FILE, SUITE_FILE
from marl.logging.run_dir import RESULT_FILE, read_results
from marl.runtime.evaluation import EPISODE_LENGTHS, EPISODE_RETURNS

RETURN_KEY = "evaluation/episode_return_mean"
TRAIN_RETURN_KEY = "episode_return_mean"
EVAL_LENGTH_KEY = "evaluation/episode_len_mean"
TRAIN_LENGTH_KEY = "episode_len_mean"
SCORES = ("evaluation", "training")
LAST = 0.1  # score="training": the share of the run whose training returns make the score


@dataclass
class Run:
    task: str
    algorithm: str
    seed: int
    family: str
    steps: np.ndarray  # env steps of the evaluations
    returns: np.ndarray  # their mean returns
    final: float
    # What the marl-eval JSON's steps draw from: (env steps, episode returns, episode lengths) per evaluation
    # (the training return's mean and length where the suite evaluated only at the end), and the final evaluation's.
    episode_points: list = field(default_factory=list)
    final_episodes: tuple = ((), ())

    def episodes_near(self, step: float) -> tuple[list, list]:
        """(returns, lengths) of the point nearest `step` env steps (the earlier one on a tie)."""
        nearest = min(self.episode_points, key=lambda p: abs(p[0] - step))
        return list(nearest[1]), list(nearest[2])


def _value(row: dict, key: str) -> float | None:
    value = row.get(key)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def read_runs(runs_dir: str | os.PathLike, score: str = "evaluation") -> tuple[list[Run], list[str]]:
    """(finished runs, names of unfinished ones) under a runs directory of `marl experiment`."""

    runs_dir = Path(runs_dir)
    runs, unfinished = [], []
    for run_file in sorted(runs_dir.glob(f"*/*/seed_*/{RUN_FILE}")):
        run_dir = run_file.parent
        info = json.loads(run_file.read_text())
        name = f"{info['task']}/{info['algorithm']}/seed_{info['seed']}"
        if not (run_dir / DONE_FILE).is_file() or not (run_dir / RESULT_FILE).is_file():
            unfinished.append(name)
            continue
        rows = read_results(run_dir)
        evaluations = [r for r in rows if _value(r, RETURN_KEY) is not None]
        # The curve: the evaluations, or the training return where the suite evaluated only at the end (or asked).
        key = RETURN_KEY if len(evaluations) >= 2 and score == "evaluation" else TRAIN_RETURN_KEY
        curve_rows = [r for r in rows if _value(r, key) is not None]
        if not curve_rows:
            unfinished.append(name + " (no return recorded)")
            continue
        steps = np.array([r["env_steps_total"] for r in curve_rows], dtype=float)
        returns = np.array([_value(r, key) for r in curve_rows], dtype=float)
        points = [(int(r["env_steps_total"]), *_episodes(r, evaluation=key == RETURN_KEY)) for r in curve_rows]
        if score == "training":
            last = returns[steps > (1 - LAST) * steps[-1]]
            final, final_episodes = float(last.mean()), ([float(x) for x in last], [])
        else:
            final = _value(evaluations[-1], RETURN_KEY) if evaluations else float(returns[-1])
            final_episodes = _episodes(evaluations[-1]) if evaluations else points[-1][1:]
        runs.append(Run(info["task"], info["algorithm"], int(info["seed"]), info.get("family", "env"), steps, returns,
                        float(final), points, final_episodes))
    if not runs:
        raise ConfigError(f"'{runs_dir}' holds no finished run of `marl experiment` (no */*/seed_*/done.json)")
    return runs, unfinished


def _episodes(row: dict, evaluation: bool = True) -> tuple[list[float], list[float]]:
    """(returns, lengths) of a result row: an evaluation's per-episode lists, or its mean as one value
    (rows written before evaluations kept their episodes; training rows)."""

    if evaluation:
        returns = [float(x) for x in row.get(EPISODE_RETURNS) or () if x is not None]
        lengths = [float(x) for x in row.get(EPISODE_LENGTHS) or () if x is not None]
        if returns and len(returns) == len(lengths):
            return returns, lengths
        mean_return, mean_length = _value(row, RETURN_KEY), _value(row, EVAL_LENGTH_KEY)
    else:
        mean_return, mean_length = _value(row, TRAIN_RETURN_KEY), _value(row, TRAIN_LENGTH_KEY)
    return [mean_return], ([mean_length] if mean_length is not None else [])


@dataclass
class Sources:
    """The runs of every source, with what the first runs directory says of its suite."""

    runs: list[Run]
    unfinished: list[str]
    runs_dir: Path | None  # the first runs directory (its suite.yaml: name, budget, targets), if any


def _seed_number(key: str, where: str) -> int:
    match = re.fullmatch(r"(?:seed|run)_?(\d+)", key)
    if not match:
        raise ConfigError(f"{where}: '{key}' is not a run key (seed_N or run_N, as marl-eval's layout has)")
    return int(match.group(1))


def _numbers(value, where: str) -> list[float]:
    values = value if isinstance(value, list) else [value]
    try:
        return [float(x) for x in values if x is not None]
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number or a list of numbers, got {str(value)[:60]}") from None


def read_marl_eval(path: str | os.PathLike) -> list[Run]:
    """The runs of a marl-eval JSON file (the return metric is `return`, as marl's and BenchMARL's files name it)."""

    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: not a readable JSON file ({e})") from None
    runs = []
    for family, tasks in _mapping(data, str(path)).items():
        for task, algorithms in _mapping(tasks, f"{path}: {family}").items():
            for algorithm, seeds in _mapping(algorithms, f"{path}: {family}/{task}").items():
                for seed_key, entry in _mapping(seeds, f"{path}: {family}/{task}/{algorithm}").items():
                    where = f"{path}: {family}/{task}/{algorithm}/{seed_key}"
                    runs.append(_marl_eval_run(_mapping(entry, where), family, task, algorithm,
                                               _seed_number(seed_key, where), where))
    if not runs:
        raise ConfigError(f"{path}: holds no run (marl-eval's layout: environment -> task -> algorithm -> seed_N -> step_K)")
    return runs


def _mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping (marl-eval's layout), got {type(value).__name__}")
    return value


def _marl_eval_run(entry: dict, family: str, task: str, algorithm: str, seed: int, where: str) -> Run:
    points = []
    for key, step in entry.items():
        if key == "absolute_metrics":
            continue
        step = _mapping(step, f"{where}/{key}")
        if "step_count" not in step or "return" not in step:
            raise ConfigError(f"{where}/{key}: needs 'step_count' and 'return' (it has {sorted(step)})")
        returns = _numbers(step["return"], f"{where}/{key}/return")
        if returns:
            points.append((int(step["step_count"]), returns, _numbers(step.get("episode_length", []), f"{where}/{key}")))
    if not points:
        raise ConfigError(f"{where}: no step with a return")
    points.sort(key=lambda p: p[0])
    final = _mapping(entry.get("absolute_metrics", {}), f"{where}/absolute_metrics")
    final_returns = _numbers(final.get("return", []), f"{where}/absolute_metrics/return")
    final_episodes = ((final_returns, _numbers(final.get("episode_length", []), f"{where}/absolute_metrics"))
                      if final_returns else (points[-1][1], points[-1][2]))
    return Run(task, algorithm, seed, family, np.array([p[0] for p in points], dtype=float),
               np.array([np.mean(p[1]) for p in points]), float(np.mean(final_episodes[0])), points, final_episodes)


def read_sources(sources, score: str = "evaluation") -> Sources:
    """Every source's runs (runs directories and marl-eval JSON files, in the order given), merged. `score`: which
    return of a runs directory's runs is the curve and the score (a JSON file's are what it holds)."""

    sources = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    if not sources:
        raise ConfigError("marl report needs at least one runs directory or marl-eval JSON file")
    found, unfinished, runs_dir = [], [], None  # found: (run, its source, whether that is a runs directory)
    for source in map(Path, sources):
        if source.is_dir():
            runs_dir = runs_dir or source
            runs, left = read_runs(source, score)
            found += [(run, source, True) for run in runs]
            unfinished += left
        elif source.exists():
            found += [(run, source, False) for run in read_marl_eval(source)]
        else:
            raise ConfigError(f"'{source}' does not exist (a runs directory or a marl-eval JSON file)")
    names = {run.algorithm.lower(): run.algorithm for run, _, from_dir in found if from_dir}
    seen: dict[tuple, Path] = {}
    for run, source, from_dir in found:
        if not from_dir:
            run.algorithm = names.get(run.algorithm.lower(), run.algorithm.upper())
        key = (run.task, run.algorithm, run.seed)
        if key in seen:
            raise ConfigError(f"run {run.task}/{run.algorithm}/seed_{run.seed} is in both {seen[key]} and {source}: "
                              "give each run once")
        seen[key] = source
    done = {f"{t}/{a}/seed_{s}" for t, a, s in seen}
    return Sources([run for run, _, _ in found], [u for u in unfinished if u.split(" ")[0] not in done], runs_dir)


def suite_of(runs_dir: Path | None) -> dict:
    """The suite a runs directory was made from (its suite.yaml), or {}."""

    suite_file = runs_dir / SUITE_FILE if runs_dir else None
    return OmegaConf.to_container(OmegaConf.load(suite_file)) if suite_file and suite_file.is_file() else {}
