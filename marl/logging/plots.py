"""`marl plot`: learning curves and throughput of one or several run directories, overlaid.

returns.png     mean episode return (all agents) and each policy's mean return vs env steps
throughput.png  env steps per second vs env steps, and env steps vs training time
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from marl.logging.run_dir import read_results

POLICY_PREFIX = "policy_return_mean/"


def _series(rows: list[dict], x_key: str, y_key: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for row in rows:
        x, y = row.get(x_key), row.get(y_key)
        if x is None or y is None or (isinstance(y, float) and math.isnan(y)):
            continue  # iterations where no episode finished report NaN (written as null)
        xs.append(x)
        ys.append(y)
    return xs, ys


def _label(run_dir: Path, all_dirs: list[Path]) -> str:
    names = [d.resolve().name for d in all_dirs]
    return run_dir.resolve().name if names.count(run_dir.resolve().name) == 1 else str(run_dir)


def plot_runs(run_dirs: list[str | os.PathLike], output_dir: str | os.PathLike) -> list[str]:
    """Writes returns.png and throughput.png into `output_dir`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dirs = [Path(d) for d in run_dirs]
    runs = {d: read_results(d) for d in dirs}
    for d, rows in runs.items():
        if not rows:
            raise ValueError(f"run directory '{d}' has no results yet (empty result.jsonl)")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    policies = sorted({k[len(POLICY_PREFIX):] for rows in runs.values() for row in rows for k in row if k.startswith(POLICY_PREFIX)})
    panels = [("episode_return_mean", "all agents: episode return")] + [(POLICY_PREFIX + p, f"policy '{p}'") for p in policies]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    cols = min(3, len(panels))
    rows_n = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 3.8 * rows_n), dpi=100, squeeze=False)
    for ax, (key, title) in zip(axes.flat, panels):
        for i, (d, rows) in enumerate(runs.items()):
            xs, ys = _series(rows, "env_steps_total", key)
            if xs:
                ax.plot(xs, ys, color=colours[i % len(colours)], label=_label(d, dirs), marker="." if len(xs) < 30 else None)
        ax.set_title(title)
        ax.set_xlabel("env steps")
        ax.set_ylabel("mean return")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("return per policy")
    fig.tight_layout()
    returns_png = out / "returns.png"
    fig.savefig(returns_png)
    plt.close(fig)

    fig, (ax_rate, ax_time) = plt.subplots(1, 2, figsize=(11, 4), dpi=100)
    for i, (d, rows) in enumerate(runs.items()):
        colour, label = colours[i % len(colours)], _label(d, dirs)
        xs, ys = _series(rows, "env_steps_total", "env_steps_per_s")
        ax_rate.plot(xs, ys, color=colour, label=label, marker="." if len(xs) < 30 else None)
        ts, steps = _series(rows, "time_total_s", "env_steps_total")
        ax_time.plot(ts, steps, color=colour, label=label)
    ax_rate.set(title="throughput", xlabel="env steps", ylabel="env steps / s")
    ax_time.set(title="progress", xlabel="training time (s)", ylabel="env steps")
    for ax in (ax_rate, ax_time):
        ax.grid(alpha=0.3)
    ax_rate.legend(fontsize=8)
    fig.tight_layout()
    throughput_png = out / "throughput.png"
    fig.savefig(throughput_png)
    plt.close(fig)
    return [str(returns_png), str(throughput_png)]
