"""`marl report`'s learning curves end where their runs ended: a run stopped early (at a `targets:` return) is not
drawn flat to the suite's budget. Checked on the curves' data (`marl.experiment.report_curves`), not on pixels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rliable import metrics

from marl.experiment.report import Report, interval_estimates, write_report
from marl.experiment.report_runs import read_runs
from marl.experiment.report_curves import curve_lines, reached_points, run_curve

BUDGET = 1000


def _run(root: Path, algo: str, seed: int, last_step: int, slope: float) -> None:
    """A run of a suite that evaluates only at the end: training returns every 100 env steps up to `last_step`."""
    d = root / "t" / algo / f"seed_{seed}"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"task": "t", "algorithm": algo, "seed": seed, "family": "gymnasium"}))
    (d / "done.json").write_text(json.dumps({"env_steps_total": last_step, "target_reached": last_step < BUDGET}))
    rows = [{"iteration": i, "env_steps_total": 100 * i, "episode_return_mean": slope * i} for i in range(1, last_step // 100 + 1)]
    rows[-1].update({"evaluation/episode_return_mean": slope * len(rows), "evaluation/episode_returns": [slope * len(rows)],
                     "evaluation/episode_lengths": [10]})
    (d / "result.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def runs_dir(tmp_path):
    (tmp_path / "suite.yaml").write_text(f"name: curves\nenv_steps: {BUDGET}\n")
    for seed, last in enumerate((300, 400, 500)):  # stopped at their target, before the budget
        _run(tmp_path, "FAST", seed, last, slope=10.0 + seed)
    for seed in range(3):  # ran to the budget
        _run(tmp_path, "FULL", seed, BUDGET, slope=1.0 + seed)
    _run(tmp_path, "INSTANT", 0, 100, slope=5.0)  # ended before the grid's first point (250 with 4 points)
    return tmp_path


def _estimate(reps=50):
    iqm = lambda s: np.array([metrics.aggregate_iqm(s[..., p]) for p in range(s.shape[-1])])  # noqa: E731
    return lambda scores: interval_estimates(scores, iqm, reps)


def test_a_run_has_no_curve_past_its_last_row():
    grid = np.array([100.0, 200.0, 300.0, 400.0])
    values = run_curve(grid, np.array([100.0, 250.0]), np.array([1.0, 4.0]))
    assert values[:2] == pytest.approx([1.0, 3.0]) and np.isnan(values[2:]).all()  # not held at 4.0 to the end
    assert reached_points(np.array([[[1.0, 2.0, np.nan]], [[1.0, np.nan, np.nan]]])) == 1
    assert reached_points(np.ones((2, 1, 3))) == 3


def test_lines_end_where_their_first_run_ended_and_say_so(runs_dir):
    runs, _ = read_runs(runs_dir)
    report = Report(runs, points=10, budget=BUDGET)
    lines = {line.algorithm: line for line in curve_lines(report.grid, report.task_curves("t"), report.ends("t"), _estimate())}

    fast = lines["FAST"]
    assert list(fast.steps) == [100, 200, 300]  # the first FAST run ended at 300: no point past it
    # every point is the IQM of the same three runs, read where they were (IQM of 3 values: the middle one)
    assert fast.point == pytest.approx([11.0 * k for k in (1, 2, 3)])
    assert (fast.low <= fast.point).all() and (fast.point <= fast.high).all()
    assert fast.label == "FAST (runs ended at 300-500 env steps; line ends at 300)"

    full = lines["FULL"]
    assert list(full.steps) == list(report.grid) and full.label == "FULL"
    assert full.point[-1] == pytest.approx(2.0 * 10)

    assert list(lines["INSTANT"].steps) == [100]
    coarse = Report(runs, points=4, budget=BUDGET)  # grid 250, 500, 750, 1000: INSTANT ended before its first point
    by = {line.algorithm: line for line in curve_lines(coarse.grid, coarse.task_curves("t"), coarse.ends("t"), _estimate())}
    assert len(by["INSTANT"].steps) == 0
    assert by["INSTANT"].label == "INSTANT (runs ended at 100 env steps, before the first point)"
    assert list(by["FAST"].steps) == [250]


def test_report_with_early_stopped_runs_draws_every_panel(runs_dir):
    paths = write_report(runs_dir, reps=50, points=10)
    assert any(p.endswith("sample_efficiency.png") for p in paths)
    assert (runs_dir / "report" / "sample_efficiency.png").stat().st_size > 10_000
