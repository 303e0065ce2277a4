"""Run directories: resolved config.yaml, result.jsonl (one result per line), progress.csv, TensorBoard events.

result.jsonl holds each result's scalars and its lists of numbers (an evaluation's per-episode
returns and lengths, `evaluation/episode_returns` and `evaluation/episode_lengths`); progress.csv,
TensorBoard, MLflow and W&B get the scalars.

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
from marl.config.sections import LoggersSection
from marl.config.checks import update_section
from marl.logging.mlflow_logger import MLflowLogger
from marl.logging.wandb_logger import WandbLogger

RESULT_FILE = "result.jsonl"
PROGRESS_FILE = "progress.csv"
CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoint"
LOGGERS_FILE = "loggers.json"  # the MLflow / W&B run ids, so a resumed run continues the same runs there


def runs_root() -> Path:
    """Where run directories go without --output: $MARL_RUNS_DIR, else ./runs."""
    return Path(os.environ.get("MARL_RUNS_DIR") or "runs")


def run_dir_name(scenario_name: str, taken=lambda name: False) -> str:
    """`<scenario>-<timestamp>`, with `-2`, `-3`, ... while `taken(name)`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name, n = f"{scenario_name}-{stamp}", 1
    while taken(name):
        n += 1
        name = f"{scenario_name}-{stamp}-{n}"
    return name


def make_run_dir(scenario_name: str, output: str | None, root: str | os.PathLike | None = None) -> Path:
    """`output`, else `<root>/<scenario>-<timestamp>` (`root`: checkpointing.storage, else `runs_root()`)."""
    if output:
        path = Path(output)
    else:
        root = Path(root) if root else runs_root()
        path = root / run_dir_name(scenario_name, lambda name: (root / name).exists())
    path.mkdir(parents=True, exist_ok=True)
    return path


def _json_value(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _is_number_list(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


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
    """Appends each iteration's result to result.jsonl, progress.csv, TensorBoard, MLflow and W&B.

    Which of them is the config's `loggers` section (result.jsonl always). Every
    logger uses env steps as its step (as CleanRL does), so runs of different
    batch sizes line up.
    """

    def __init__(self, run_dir: Path, config_dict: dict, *, resume_from: dict | None = None, tensorboard: bool = True):
        """`resume_from`: the last result kept (iteration, env_steps_total) when continuing a run."""

        self.dir = Path(run_dir)
        settings = LoggersSection()
        update_section(settings, "loggers", dict(config_dict.get("loggers") or {}))
        self.settings = settings
        tensorboard = tensorboard and settings.tensorboard
        OmegaConf.save(OmegaConf.create(config_dict), self.dir / CONFIG_FILE)
        if resume_from is not None:
            _drop_rows_after(self.dir, int(resume_from["iteration"]))
        header = None
        progress = self.dir / PROGRESS_FILE
        if progress.is_file() and progress.stat().st_size:
            with progress.open(newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), None)
        self._jsonl = open(self.dir / RESULT_FILE, "a", encoding="utf-8")
        self._csv_file = open(progress, "a", newline="", encoding="utf-8") if settings.csv else None
        # Columns are fixed by the first row; later keys (e.g. evaluation/...) stay in result.jsonl.
        self._csv = csv.DictWriter(self._csv_file, fieldnames=header, extrasaction="ignore") if header else None
        self._tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            # purge_step: TensorBoard hides events an earlier process logged past the resumed checkpoint.
            purge = None if resume_from is None else int(resume_from.get("env_steps_total", 0)) + 1
            self._tb = SummaryWriter(str(self.dir), purge_step=purge, flush_secs=10)
        self._remote = self._open_remote_loggers(config_dict, settings)

    def _open_remote_loggers(self, config_dict: dict, settings) -> dict:
        """MLflow / W&B loggers, continuing the runs recorded in loggers.json (a resumed run)."""
        ids_file = self.dir / LOGGERS_FILE
        ids = json.loads(ids_file.read_text()) if ids_file.is_file() else {}
        remote = {}
        if settings.mlflow:
            remote["mlflow"] = MLflowLogger(self.dir, config_dict, settings, run_id=ids.get("mlflow"))
        if settings.wandb:
            remote["wandb"] = WandbLogger(self.dir, config_dict, settings, run_id=ids.get("wandb"))
        if remote:
            ids.update({name: logger.run_id for name, logger in remote.items()})
            ids_file.write_text(json.dumps(ids, indent=1))
        return remote

    def log(self, result: dict) -> None:
        row = {k: _json_value(v) for k, v in result.items() if isinstance(v, (int, float, str, bool)) or v is None}
        # result.jsonl also keeps lists of numbers (an evaluation's per-episode returns and lengths); the other
        # loggers take scalars only.
        full = {k: row[k] if k in row else [_json_value(x) for x in v] for k, v in result.items()
                if k in row or _is_number_list(v)}
        self._jsonl.write(json.dumps(full) + "\n")
        self._jsonl.flush()
        if self._csv_file is not None:
            if self._csv is None:
                self._csv = csv.DictWriter(self._csv_file, fieldnames=list(row), extrasaction="ignore")
                self._csv.writeheader()
            self._csv.writerow(row)
            self._csv_file.flush()
        step = int(result.get("env_steps_total", result.get("iteration", 0)))
        for logger in self._remote.values():
            logger.log(row, step)
        if self._tb is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None:
                    self._tb.add_scalar(key, value, global_step=step)

    def log_checkpoint(self, path: str | os.PathLike) -> None:
        """Uploads a checkpoint directory as an artifact to the loggers that keep them (MLflow, W&B)."""
        if self.settings.log_checkpoint:
            for logger in self._remote.values():
                logger.log_checkpoint(Path(path))

    def close(self, status: str = "finished") -> None:
        """`status`: finished | interrupted | failed (what MLflow and W&B record for the run)."""
        self._jsonl.close()
        if self._csv_file is not None:
            self._csv_file.close()
        if self._tb is not None:
            self._tb.close()
        for logger in self._remote.values():
            logger.close(status)
