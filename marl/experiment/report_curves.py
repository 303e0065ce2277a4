"""The learning curves of `marl report`'s sample_efficiency.png, as data: one IQM line and CI band per algorithm.

A run's curve is its returns read at the report's grid of env steps and has no points past the run's last
row: a run that stopped early (a `targets:` row that reached its return, or ran to its own smaller budget)
is not drawn flat to the suite's budget. An algorithm's line over several runs ends at the last grid point
that every one of its runs reached, so each point is the IQM of the same runs (the runs still going after
the first one stopped are the slow ones: their IQM alone would read as a drop); its legend label then says
where its runs ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class CurveLine:
    algorithm: str
    label: str  # the legend's text: the algorithm, and where its runs ended when that is before the grid's end
    steps: np.ndarray  # the grid's env steps the line is drawn at (empty: every run ended before the first)
    point: np.ndarray  # IQM at each of `steps`
    low: np.ndarray  # the 95 % CI band
    high: np.ndarray


def run_curve(grid: np.ndarray, steps: np.ndarray, returns: np.ndarray) -> np.ndarray:
    """The run's returns at the grid's env steps, linearly interpolated; NaN past its last row (it ended there)."""
    values = np.interp(grid, steps, returns)
    values[np.asarray(grid) > steps[-1]] = np.nan
    return values


def reached_points(curves: np.ndarray) -> int:
    """How many leading grid points every run of `curves` ([runs x tasks x] points) has a value at."""
    reached = ~np.isnan(curves.reshape(-1, curves.shape[-1])).any(axis=0)
    return len(reached) if reached.all() else int(np.argmin(reached))


def _label(algorithm: str, ends: list[float], drawn: int, grid: np.ndarray) -> str:
    if drawn == len(grid):
        return algorithm
    lo, hi = min(ends), max(ends)
    where = f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}-{hi:,.0f}"
    if drawn == 0:
        return f"{algorithm} (runs ended at {where} env steps, before the first point)"
    return f"{algorithm} (runs ended at {where} env steps; line ends at {grid[drawn - 1]:,.0f})"


def curve_lines(grid: np.ndarray, curves: dict[str, np.ndarray], ends: dict[str, list[float]],
                estimate: Callable[[dict], tuple[dict, dict]]) -> list[CurveLine]:
    """One line per algorithm of a panel: `curves` {algorithm: runs x tasks x points}, `ends` {algorithm: the
    env steps of its runs' last rows}, `estimate` the report's (point, interval) bootstrap of a score dict."""
    lines = []
    for algorithm, scores in curves.items():
        drawn = reached_points(scores)
        label = _label(algorithm, ends[algorithm], drawn, grid)
        if drawn == 0:
            empty = np.array([])
            lines.append(CurveLine(algorithm, label, empty, empty, empty, empty))
            continue
        point, interval = estimate({algorithm: scores[..., :drawn]})
        lines.append(CurveLine(algorithm, label, np.asarray(grid[:drawn]), np.asarray(point[algorithm]),
                               np.asarray(interval[algorithm][0]), np.asarray(interval[algorithm][1])))
    return lines


def draw(ax, lines: list[CurveLine], colours: dict, xlabel: str, ylabel: str) -> None:
    """The lines and bands on one panel, in rliable's sample-efficiency style, each over its own steps."""
    from rliable import plot_utils

    for line in lines:
        plot_utils.plot_sample_efficiency_curve(
            line.steps, {line.label: line.point}, {line.label: (line.low, line.high)}, algorithms=[line.label],
            colors={line.label: colours[line.algorithm]}, xlabel=xlabel, ylabel=ylabel, ax=ax, labelsize="medium",
            ticklabelsize="small")
