"""Run directories: resolved config.yaml, result.jsonl (one result per line), progress.csv, TensorBoard events.

A resumed run appends to the same files. Rows logged after the checkpoint it
resumes from are dropped first (those iterations are trained again), so
every file holds each iteration once.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path

from omegaconf import OmegaConf

RESULT_FILE = "result.jsonl"
PROGRESS_FILE = "progress.csv"
CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoint"


def runs_root() -> Path:
    """Where run directories go without --output: $MARL_RUNS_DIR, else ./runs."""
    return Path(os.environ.get("MARL_RUNS_DIR") or "runs")


def make_run_dir(scenario_name: str, output: str | None) -> Path:
    if output:
        path = Path(output)
    else:
        root = runs_root()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = root / f"{scenario_name}-{stamp}"
        n = 1
        while path.exists():
            n += 1
            path = root / f"{scenario_name}-{stamp}-{n}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _json_value(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def read_results(run_dir: str | os.PathLike) -> list[dict]:
    """The rows of a run's result.jsonl (NaN was written as null)."""
    file = Path(run_dir) / RESULT_FILE
    if not file.is_file():
        raise FileNotFoundError(f"'{run_dir}' is not a marl run directory (no {RESULT_FILE})")
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]


def _drop_rows_after(run_dir: Path, iteration: int) -> None:
    """Keeps only the rows of iterations <= `iteration` in result.jsonl and progress.csv."""
    jsonl = run_dir / RESULT_FILE
    if jsonl.is_file():
        kept = [line for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip() and json.loads(line).get("iteration", 0) <= iteration]
        jsonl.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    progress = run_dir / PROGRESS_FILE
    if progress.is_file():
        with progress.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            rows = [r for r in reader if r.get("iteration") and int(r["iteration"]) <= iteration]
        with progress.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)


class RunLogger:
    """Appends each iteration's result to result.jsonl, progress.csv and TensorBoard event files.

    TensorBoard scalars use env steps as their step (as CleanRL does), so runs
    of different batch sizes line up.
    """

    def __init__(self, run_dir: Path, config_dict: dict, *, resume_from: dict | None = None, tensorboard: bool = True):
        """`resume_from`: the last result kept (iteration, env_steps_total) when continuing a run."""
        self.dir = Path(run_dir)
        OmegaConf.save(OmegaConf.create(config_dict), self.dir / CONFIG_FILE)
        if resume_from is not None:
            _drop_rows_after(self.dir, int(resume_from["iteration"]))
        header = None
        progress = self.dir / PROGRESS_FILE
        if progress.is_file() and progress.stat().st_size:
            with progress.open(newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), None)
        self._jsonl = open(self.dir / RESULT_FILE, "a", encoding="utf-8")
        self._csv_file = open(progress, "a", newline="", encoding="utf-8")
        # Columns are fixed by the first row; later keys (e.g. evaluation/...) stay in result.jsonl.
        self._csv = csv.DictWriter(self._csv_file, fieldnames=header, extrasaction="ignore") if header else None
        self._tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            # purge_step: TensorBoard hides events an earlier process logged past the resumed checkpoint.
            purge = None if resume_from is None else int(resume_from.get("env_steps_total", 0)) + 1
            self._tb = SummaryWriter(str(self.dir), purge_step=purge, flush_secs=10)

    def log(self, result: dict) -> None:
        row = {k: _json_value(v) for k, v in result.items() if isinstance(v, (int, float, str, bool)) or v is None}
        self._jsonl.write(json.dumps(row) + "\n")
        self._jsonl.flush()
        if self._csv is None:
            self._csv = csv.DictWriter(self._csv_file, fieldnames=list(row), extrasaction="ignore")
            self._csv.writeheader()
        self._csv.writerow(row)
        self._csv_file.flush()
        if self._tb is not None:
            step = int(result.get("env_steps_total", result.get("iteration", 0)))
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
                    self._tb.add_scalar(key, value, global_step=step)

    def close(self) -> None:
        self._jsonl.close()
        self._csv_file.close()
        if self._tb is not None:
            self._tb.close()
