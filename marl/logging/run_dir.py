"""Run directories: resolved config.yaml, result.jsonl (one result per line), progress.csv."""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

from omegaconf import OmegaConf


def make_run_dir(scenario_name: str, output: str | None) -> Path:
    if output:
        path = Path(output)
    else:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path("runs") / f"{scenario_name}-{stamp}"
        n = 1
        while path.exists():
            n += 1
            path = Path("runs") / f"{scenario_name}-{stamp}-{n}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _json_value(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


class RunLogger:
    """Appends each iteration's result to result.jsonl and progress.csv."""

    def __init__(self, run_dir: Path, config_dict: dict):
        self.dir = run_dir
        OmegaConf.save(OmegaConf.create(config_dict), run_dir / "config.yaml")
        self._jsonl = open(run_dir / "result.jsonl", "a", encoding="utf-8")
        self._csv_file = open(run_dir / "progress.csv", "a", newline="", encoding="utf-8")
        self._csv = None

    def log(self, result: dict) -> None:
        row = {k: _json_value(v) for k, v in result.items() if isinstance(v, (int, float, str, bool)) or v is None}
        self._jsonl.write(json.dumps(row) + "\n")
        self._jsonl.flush()
        if self._csv is None:
            # Columns are fixed by the first row; later keys (e.g. evaluation/...) stay in result.jsonl.
            self._csv = csv.DictWriter(self._csv_file, fieldnames=list(row), extrasaction="ignore")
            self._csv.writeheader()
        self._csv.writerow(row)
        self._csv_file.flush()

    def close(self) -> None:
        self._jsonl.close()
        self._csv_file.close()
