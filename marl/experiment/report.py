"""`marl report RUNS_DIR [MORE ...]`: a suite's runs aggregated with rliable.

The runs come from runs directories of `marl experiment` and from marl-eval JSON files (a committed
report's, or a peer library's), merged (`report_runs`).

Scores. A run's score is its last evaluation's mean return (`marl experiment` evaluates
`evaluation.episodes` greedy episodes when the budget is reached); its learning curve is its
evaluations (`evaluation/episode_return_mean`; the training return where a suite evaluates only
at the end) read at `points` env-step values from budget/points to the budget, linearly
interpolated between evaluations. Per task, IQM and mean are in the task's return units; overall,
each task's scores are min-max normalised over every run and curve point of that task (as
marl-eval normalises returns), so tasks weigh alike. 95 % confidence intervals are rliable's
stratified bootstrap (`rliable.library.get_interval_estimates`, percentile method) over runs,
with NumPy's global generator (which rliable resamples with) seeded: the same runs give the same report.

Writes into RUNS_DIR/report/ (or --output):
    results.md               the table: per task and overall, IQM and mean with CIs, per algorithm
    aggregates.json          the same numbers
    marl_eval.json           the runs in marl-eval's raw-data layout (env -> task -> algorithm -> seed_N ->
                             step_K {step_count, return: [per episode], episode_length: [per episode]},
                             absolute_metrics {the final evaluation's return and episode_length lists})
    sample_efficiency.png    IQM vs env steps with CI bands: overall (normalised) and one panel per task; a line
                             ends where its runs did (`report_curves`: runs stopped at a target are not drawn flat)
    performance_profile.png  fraction of runs above each normalised score, with CI bands
    aggregates.png           overall IQM and mean with CIs
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import numpy as np

from marl.errors import ConfigError
from marl.experiment.report_curves import curve_lines, draw, run_curve
from marl.experiment.report_runs import LAST, SCORES, Run, read_sources, suite_of
from marl.experiment.targets import targets_report
from marl.logging.run_dir import read_results

CI_SIZE = 0.95


def _ordered(values) -> list:
    return list(dict.fromkeys(values))


def interval_estimates(score_dict: dict, func, reps: int, seed: int = 0):
    """rliable's stratified-bootstrap point and 95 % interval estimates, reproducible.

    rliable's `StratifiedBootstrap` draws its resampled run indices from NumPy's global generator
    (not from `random_state`), so that generator is seeded for the call and restored after it.
    """

    from rliable import library as rly

    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # arch (rliable's bootstrap) deprecates random_state; rliable passes it
            warnings.simplefilter("ignore", FutureWarning)
            return rly.get_interval_estimates(score_dict, func, reps=reps, confidence_interval_size=CI_SIZE,
                                              random_state=np.random.RandomState(seed))
    finally:
        np.random.set_state(saved)


def aggregate_functions():
    from rliable import metrics

    return {"iqm": metrics.aggregate_iqm, "mean": metrics.aggregate_mean}


class Report:
    """The runs as rliable's score matrices: {algorithm: (num_runs x num_tasks [x points])}."""

    def __init__(self, runs: list[Run], points: int = 10, budget: int | None = None):
        self.runs = runs
        self.tasks = _ordered(r.task for r in runs)
        self.algorithms = _ordered(r.algorithm for r in runs)
        budget = budget or int(max(r.steps[-1] for r in runs))
        self.grid = np.linspace(budget / points, budget, points)
        self.by = {(r.task, r.algorithm): sorted((x for x in runs if x.task == r.task and x.algorithm == r.algorithm),
                                                 key=lambda x: x.seed) for r in runs}
        # Per-task min-max over every run's final score and curve: the overall (normalised) scale.
        self.bounds = {}
        for task in self.tasks:
            values = np.concatenate([np.append(r.returns, r.final) for r in runs if r.task == task])
            lo, hi = float(values.min()), float(values.max())
            self.bounds[task] = (lo, hi if hi > lo else lo + 1.0)

    def curve(self, run: Run) -> np.ndarray:
        """The run's returns at the grid's env steps; NaN past its last row (`report_curves.run_curve`)."""
        return run_curve(self.grid, run.steps, run.returns)

    def ends(self, task: str | None = None) -> dict[str, list[float]]:
        """{algorithm: env steps of its runs' last rows}, on one task or all."""
        return {a: [float(r.steps[-1]) for r in self.runs if r.algorithm == a and task in (None, r.task)] for a in self.algorithms}

    def normalise(self, task: str, values):
        lo, hi = self.bounds[task]
        return (np.asarray(values, dtype=float) - lo) / (hi - lo)

    def task_scores(self, task: str) -> dict[str, np.ndarray]:
        """{algorithm: (num_runs x 1)} final scores on one task, in its return units."""
        return {a: np.array([[r.final] for r in self.by[(task, a)]]) for a in self.algorithms if (task, a) in self.by}

    def task_curves(self, task: str) -> dict[str, np.ndarray]:
        return {a: np.stack([self.curve(r) for r in self.by[(task, a)]])[:, None, :] for a in self.algorithms if (task, a) in self.by}

    def _common_seeds(self, algorithm: str) -> list[int]:
        seeds = None
        for task in self.tasks:
            have = {r.seed for r in self.by.get((task, algorithm), [])}
            seeds = have if seeds is None else seeds & have
        return sorted(seeds or [])

    def overall_scores(self) -> dict[str, np.ndarray]:
        """{algorithm: (num_runs x num_tasks)} normalised final scores (seeds finished on every task)."""
        out = {}
        for a in self.algorithms:
            seeds = self._common_seeds(a)
            if seeds:
                out[a] = np.array([[float(self.normalise(t, next(r.final for r in self.by[(t, a)] if r.seed == s)))
                                    for t in self.tasks] for s in seeds])
        return out

    def overall_curves(self) -> dict[str, np.ndarray]:
        out = {}
        for a in self.algorithms:
            seeds = self._common_seeds(a)
            if seeds:
                out[a] = np.array([[self.normalise(t, self.curve(next(r for r in self.by[(t, a)] if r.seed == s)))
                                    for t in self.tasks] for s in seeds])
        return out


def aggregates(report: Report, reps: int) -> dict:
    """{'tasks': {task: {algorithm: {iqm: [point, lo, hi], mean: [...], runs}}}, 'overall': {...}}."""
    out: dict = {"tasks": {}, "overall": {}, "normalisation": {t: list(b) for t, b in report.bounds.items()}}
    for name, fn in aggregate_functions().items():
        for task in report.tasks:
            scores = report.task_scores(task)
            point, interval = interval_estimates(scores, lambda s, fn=fn: np.array([fn(s)]), reps)
            for a in scores:
                entry = out["tasks"].setdefault(task, {}).setdefault(a, {"runs": int(scores[a].shape[0])})
                entry[name] = [float(point[a][0]), float(interval[a][0][0]), float(interval[a][1][0])]
        scores = report.overall_scores()
        point, interval = interval_estimates(scores, lambda s, fn=fn: np.array([fn(s)]), reps)
        for a in scores:
            entry = out["overall"].setdefault(a, {"runs": int(scores[a].shape[0]), "tasks": len(report.tasks)})
            entry[name] = [float(point[a][0]), float(interval[a][0][0]), float(interval[a][1][0])]
    return out


def _fmt(triple, digits: int) -> str:
    point, lo, hi = triple
    return f"{point:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


SCORE_TEXT = {"evaluation": "the final greedy evaluation's mean return",
              "training": f"the exploring policy's training return, the mean over the last {LAST * 100:.0f} % of each run"}


def markdown(report: Report, numbers: dict, unfinished: list[str], title: str, budget: int | None,
             score: str = "evaluation") -> str:
    lines = [f"# {title}", ""]
    seeds = {len(v) for v in report.by.values()}
    lines += [
        f"{len(report.tasks)} tasks x {len(report.algorithms)} algorithms, {'/'.join(map(str, sorted(seeds)))} seeds each"
        + (f", {budget} env steps per run" if budget else "") + f". Score: {SCORE_TEXT[score]}.",
        "IQM (interquartile mean) and mean with 95 % stratified-bootstrap confidence intervals (rliable).", "",
        "## Per task (returns)", "",
        "| task | algorithm | runs | IQM [95 % CI] | mean [95 % CI] |", "| --- | --- | --- | --- | --- |",
    ]
    for task, algos in numbers["tasks"].items():
        for a, e in algos.items():
            lines.append(f"| {task} | {a} | {e['runs']} | {_fmt(e['iqm'], 2)} | {_fmt(e['mean'], 2)} |")
    lines += [
        "", "## Overall (scores min-max normalised per task)", "",
        "| algorithm | runs x tasks | IQM [95 % CI] | mean [95 % CI] |", "| --- | --- | --- | --- |",
    ]
    for a, e in numbers["overall"].items():
        lines.append(f"| {a} | {e['runs']} x {e['tasks']} | {_fmt(e['iqm'], 3)} | {_fmt(e['mean'], 3)} |")
    lines += ["", "Normalisation bounds (min, max return per task): "
              + ", ".join(f"{t} [{lo:.2f}, {hi:.2f}]" for t, (lo, hi) in numbers["normalisation"].items()), ""]
    lines += ["![IQM vs env steps](sample_efficiency.png)", ""]
    if numbers["overall"]:
        lines += ["![performance profile](performance_profile.png)", "", "![aggregates](aggregates.png)", ""]
    else:
        lines.insert(lines.index("## Overall (scores min-max normalised per task)") + 1, "\nNo algorithm ran every task.")
    if unfinished:
        lines += [f"Not included (unfinished): {', '.join(unfinished)}", ""]
    return "\n".join(lines)


def marl_eval_json(report: Report) -> dict:
    """The runs in marl-eval's raw-data layout (as BenchMARL and Mava write it).

    environment -> task -> algorithm (lower case) -> seed_N -> step_K {step_count, return: [...],
    episode_length: [...]} and absolute_metrics {return: [...], episode_length: [...]}. Every run has the
    same steps, as marl-eval requires: the report's grid of env steps (`step_count`); a step's lists are the
    episodes of the run's evaluation nearest that many env steps (one value per episode; the mean as one
    value for rows written before evaluations kept their episodes, and the training return where the suite
    evaluated only at the end). absolute_metrics: the final greedy evaluation's episodes (the run's score).
    """
    out: dict = {}
    for r in report.runs:
        seed_entry = {}
        for i, step in enumerate(report.grid):
            returns, lengths = r.episodes_near(step)
            seed_entry[f"step_{i}"] = {"step_count": int(step), "return": returns, "episode_length": lengths}
        returns, lengths = r.final_episodes
        seed_entry["absolute_metrics"] = {"return": list(returns), "episode_length": list(lengths)}
        out.setdefault(r.family, {}).setdefault(r.task, {}).setdefault(r.algorithm.lower(), {})[f"seed_{r.seed}"] = seed_entry
    return out


def plots(report: Report, out: Path, reps: int) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import library as rly
    from rliable import metrics, plot_utils

    paths = []
    iqm_per_point = lambda s: np.array([metrics.aggregate_iqm(s[..., p]) for p in range(s.shape[-1])])  # noqa: E731
    overall = report.overall_curves()  # empty where no algorithm ran every task (a suite of `targets:` rows)
    estimate = lambda scores: interval_estimates(scores, iqm_per_point, reps)  # noqa: E731
    panels = [("overall (normalised)", curve_lines(report.grid, overall, report.ends(), estimate), "IQM normalised return")] if overall else []
    panels += [(task, curve_lines(report.grid, report.task_curves(task), report.ends(task), estimate), "IQM return")
               for task in report.tasks]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), dpi=100, squeeze=False)
    colours = dict(zip(report.algorithms, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, (title, lines, ylabel) in zip(axes.flat, panels):
        draw(ax, lines, colours, "env steps", ylabel)  # each line ends where its runs did (report_curves)
        ax.set_title(title)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    for ax in list(axes.flat)[:len(panels) if len({tuple(line.label for line in c) for _, c, _ in panels}) > 1 else 1]:
        ax.legend(fontsize=8, loc="best")  # every panel where panels show different algorithms
    fig.tight_layout()
    paths.append(out / "sample_efficiency.png")
    fig.savefig(paths[-1])
    plt.close(fig)

    scores = report.overall_scores()
    if not scores:
        return paths
    taus = np.linspace(0.0, 1.0, 41)

    saved = np.random.get_state()
    np.random.seed(0)  # rliable resamples with NumPy's global generator (see interval_estimates)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            profiles, profile_cis = rly.create_performance_profile(scores, taus, reps=reps)
    finally:
        np.random.set_state(saved)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    plot_utils.plot_performance_profiles(profiles, taus, performance_profile_cis=profile_cis, colors=colours, ax=ax,
                                         xlabel=r"normalised score $\tau$", ylabel=r"fraction of runs with score > $\tau$",
                                         labelsize="medium", ticklabelsize="small")
    ax.legend([plt.Line2D([0], [0], color=colours[a], lw=2) for a in profiles], list(profiles), fontsize=8, loc="best")
    ax.set_title("performance profile (all tasks)")
    fig.tight_layout()
    paths.append(out / "performance_profile.png")
    fig.savefig(paths[-1])
    plt.close(fig)

    fns = aggregate_functions()
    point, interval = interval_estimates(scores, lambda s: np.array([fns["iqm"](s), fns["mean"](s)]), reps)
    fig, axes = plot_utils.plot_interval_estimates(point, interval, metric_names=["IQM", "mean"],
                                                   algorithms=list(scores), colors=colours,
                                                   xlabel="normalised score", xlabel_y_coordinate=-0.3,
                                                   subfigure_width=3.5, row_height=0.6)
    paths.append(out / "aggregates.png")
    fig.savefig(paths[-1], bbox_inches="tight", dpi=100)
    plt.close(fig)
    return paths


def write_report(sources, output: str | os.PathLike | None = None, *, reps: int = 2000,
                 points: int = 10, score: str = "evaluation") -> list[str]:
    """Writes the report of runs directories and marl-eval JSON files (`report_runs`); returns the paths written.

    The first runs directory names the suite, sets the budget (its suite.yaml) and is where the report goes
    without `output`; a report of JSON files alone needs `output`. `score`: `evaluation` (the greedy evaluations)
    or `training` (the exploring policy's training returns: a runs directory's curve and score).
    """

    if reps < 1 or points < 1:
        raise ConfigError(f"--reps and --points must be >= 1, got {reps} and {points}")
    if score not in SCORES:
        raise ConfigError(f"--score must be one of {list(SCORES)}, got '{score}'")
    found = read_sources(sources, score)
    runs_dir, runs, unfinished = found.runs_dir, found.runs, found.unfinished
    if output is None and runs_dir is None:
        raise ConfigError("--output is needed when no source is a runs directory (where should the report go?)")
    suite = suite_of(runs_dir)
    budget = suite.get("env_steps")
    report = Report(runs, points=points, budget=budget)
    out = Path(output) if output else runs_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    numbers = aggregates(report, reps)
    numbers["unfinished"] = unfinished
    numbers["grid_env_steps"] = [int(x) for x in report.grid]
    title = f"Suite `{suite.get('name', runs_dir.name if runs_dir else out.name)}`"
    paths = [out / "results.md", out / "aggregates.json", out / "marl_eval.json"]
    target_lines, numbers["targets"] = targets_report(runs_dir, suite, read_results) if runs_dir else ([], [])
    text = markdown(report, numbers, unfinished, title, None if target_lines else budget, score)
    if target_lines:  # the runs are the targets' rows, not a tasks x algorithms grid
        grid = text.splitlines()[2].split(",")[0]
        text = text.replace(grid, f"{len(numbers['targets'])} target rows ({len(runs)} runs: each to its target or its budget)", 1)
    paths[0].write_text(text.replace("\n## Per task", "\n" + "\n".join(target_lines) + "\n## Per task", 1) if target_lines else text)
    paths[1].write_text(json.dumps(numbers, indent=1))
    paths[2].write_text(json.dumps(marl_eval_json(report), indent=1))
    paths += plots(report, out, reps)
    return [str(p) for p in paths]
