"""Small helpers shared by the benchmark scripts (tables, medians, timing).

The benchmark machines are shared 2-core boxes with 10-25 % run-to-run noise,
so every script measures marl and its baseline interleaved in one process and
reports the median over repeats rather than a single figure.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# `python -m benchmarks NAME` names a file here: every table the run prints is appended to it as a JSON line.
TABLES_ENV = "MARL_BENCH_TABLES"


def median(values) -> float:
    values = [v for v in values if v == v]  # drop NaN
    return statistics.median(values) if values else float("nan")


def spread(values) -> str:
    """'min-max' of a list, for showing the noise next to a median."""
    values = [v for v in values if v == v]
    if not values:
        return "-"
    return f"{fmt_num(min(values))}-{fmt_num(max(values))}"


def fmt_num(x: float, digits: int = 3) -> str:
    """Compact number: thousands separators for big values, `digits` significant figures for small ones."""
    if x != x:
        return "nan"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def print_table(headers: list[str], rows: list[list], title: str | None = None) -> None:
    """A plain fixed-width text table (first column left-aligned, the rest right-aligned)."""
    cells = [[str(c) for c in row] for row in rows]
    if os.environ.get(TABLES_ENV):
        with open(os.environ[TABLES_ENV], "a") as f:
            f.write(json.dumps({"title": title, "headers": [str(h) for h in headers], "rows": cells}) + "\n")
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(values):
        parts = [values[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(values[1:], widths[1:])]
        return "  ".join(parts)

    if title:
        print(f"\n{title}")
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(line(row))


def machine_line(with_load: bool = True) -> str:
    import torch

    line = (f"python {platform.python_version()}, torch {torch.__version__} "
            f"(threads {torch.get_num_threads()}), {os.cpu_count()} CPUs")
    if torch.cuda.is_available():
        line += f", {torch.cuda.get_device_name(0)}"
    if not with_load:
        return line
    try:
        load = os.getloadavg()
        return f"{line}, load avg {load[0]:.2f}/{load[1]:.2f}"
    except OSError:
        return f"{line}, load avg n/a"


def run_for(seconds: float, step_fn) -> tuple[int, float]:
    """Calls `step_fn()` (returning a step count) until `seconds` have passed; returns (steps, elapsed)."""
    steps = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        steps += step_fn()
        now = time.perf_counter()
        if now >= deadline:
            return steps, now - start


def flush() -> None:
    sys.stdout.flush()


def write_json(path: str, record: dict) -> None:
    """A script's raw rows (its --json file), with the command, machine and load average beside them.

    The record `python -m benchmarks` keeps (benchmarks/_records.py) holds the printed tables; this
    file is the script's own detail (per-seed curves, events) for a later --merge or plot.
    """
    head = {"command": " ".join(sys.argv), "machine": machine_line(with_load=False)}
    try:
        head["load_avg"] = os.getloadavg()[0]
    except OSError:
        head["load_avg"] = None
    with open(path, "w") as f:
        json.dump({**head, **record}, f, indent=1, default=str)


def per_point(fn):
    """rliable's aggregate `fn` at every point of a (seeds x tasks x points) score array."""
    import numpy as np

    return lambda s: np.array([fn(s[..., p]) for p in range(s.shape[-1])])


def seed_estimates(scores, fn, reps: int):
    """(point, low, high) arrays of rliable's aggregate `fn` (e.g. `metrics.aggregate_iqm`) over the seeds (rows) of
    `scores` at each point (column), with its 95 % stratified-bootstrap interval; NaN at a point some seed has no
    score at."""
    import numpy as np

    from marl.experiment.report import interval_estimates

    scores = np.asarray(scores, dtype=float)
    out = np.full((3, scores.shape[1]), np.nan)
    whole = [p for p in range(scores.shape[1]) if not np.isnan(scores[:, p]).any()]
    if whole:
        point, interval = interval_estimates({"x": scores[:, None, whole]}, per_point(fn), reps)
        out[:, whole] = [np.asarray(point["x"]), np.asarray(interval["x"][0]), np.asarray(interval["x"][1])]
    return out[0], out[1], out[2]


def estimate_cells(scores, fn, reps: int, fmt=lambda x: f"{x:.2f}") -> list[str]:
    """'point [low, high]' of `seed_estimates` at each point, '-' where some seed has no score."""
    return ["-" if m != m else f"{fmt(m)} [{fmt(lo)}, {fmt(hi)}]" for m, lo, hi in zip(*seed_estimates(scores, fn, reps))]


def jaxmarl_source(venv: Path, src: str | None) -> str:
    """The JaxMARL checkout whose baselines a comparison runs: `src` if given, else the one
    benchmarks/peers/setup_jaxmarl.sh recorded in `venv`; exits with the setup command when neither is there."""
    if src:
        return src
    if not (Path(venv) / "JAXMARL_SRC").is_file():
        raise SystemExit(f"no JaxMARL venv at {venv}: run JAXMARL_SRC=... bash benchmarks/peers/setup_jaxmarl.sh first")
    return (Path(venv) / "JAXMARL_SRC").read_text().strip()


def export_revision(rev: str) -> Path:
    """A git revision of this repository's tracked files in a new temporary folder (a baseline a script measures
    beside this working tree, each in its own process with PYTHONPATH set to its folder)."""
    folder = Path(tempfile.mkdtemp(prefix=f"marl-{rev[:12]}-"))
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def run_in_tree(root: Path, code: str, args: list[str], label: str) -> list[dict]:
    """`python -c code args` with `root`'s marl (a revision `export_revision` made, or this tree) and one thread; the
    JSON rows it printed. A failed child ends the script with its label and the tail of its stderr."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{label} in {root} failed:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
