"""MLflow: a run's resolved config, every metric (step = env steps) and its final checkpoint.

Enabled with `loggers.mlflow: true`; `loggers.mlflow_tracking_uri` names a tracking
server (http://host:5000) or store, else $MLFLOW_TRACKING_URI, else a local store in the
run directory: RUN_DIR/mlflow.db (SQLite: MLflow 3 keeps its plain-file store only behind
MLFLOW_ALLOW_FILE_STORE) with artifacts in RUN_DIR/mlartifacts; browse it with
`mlflow ui --backend-store-uri sqlite:///RUN_DIR/mlflow.db`. A resumed run (`marl train --resume`, `marl experiment` re-run)
continues the same MLflow run: its id is kept in RUN_DIR/loggers.json.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from marl.errors import ConfigError
import importlib.util

MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
BATCH = 1000  # metrics per log_batch call (MLflow's limit)


def flatten(config: dict, prefix: str = "") -> dict[str, str]:
    """{'training': {'lr': 1e-3}} -> {'training.lr': '0.001'}: the config as MLflow params."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = str(value)[:MAX_PARAM_LENGTH]
    return out


class MLflowLogger:
    def __init__(self, run_dir: Path, config: dict, settings, run_id: str | None = None):
        if importlib.util.find_spec("mlflow") is None:
            raise ConfigError("loggers.mlflow needs the mlflow package: pip install 'marl[mlflow]'")
        uri = settings.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
        artifacts = None
        if uri.startswith("sqlite:///"):  # a local store: a new experiment's artifacts go beside the database
            artifacts = (Path(uri[len("sqlite:///"):]).resolve().parent / "mlartifacts").as_uri()  # not ./mlruns
        self.tracking_uri = uri
        try:
            self._open(run_dir, config, settings, run_id, artifacts)
        except Exception as err:  # an unreachable server, a store MLflow refuses: one line, naming the key
            raise ConfigError(f"loggers.mlflow: cannot log to '{uri}': {err}".splitlines()[0]) from None

    def _open(self, run_dir: Path, config: dict, settings, run_id: str | None, artifacts: str | None) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        if run_id is None:
            experiment = self.client.get_experiment_by_name(settings.mlflow_experiment)
            experiment_id = (experiment.experiment_id if experiment is not None
                             else self.client.create_experiment(settings.mlflow_experiment, artifact_location=artifacts))
            run = self.client.create_run(experiment_id, run_name=run_dir.name, tags={"marl.run_dir": str(run_dir.resolve())})
            self.run_id = run.info.run_id
            from mlflow.entities import Param

            params = [Param(k, v) for k, v in flatten(config).items()]
            for i in range(0, len(params), 100):  # at most 100 params per call
                self.client.log_batch(self.run_id, params=params[i : i + 100])
        else:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
        config_file = run_dir / "config.yaml"
        if config_file.is_file():
            self.client.log_artifact(self.run_id, str(config_file))

    def log(self, row: dict, step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, step) for key, value in row.items()
                   if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value]
        for i in range(0, len(metrics), BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i : i + BATCH])

    def log_checkpoint(self, path: Path) -> None:
        self.client.log_artifacts(self.run_id, str(path), artifact_path="checkpoint")

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status={"finished": "FINISHED", "interrupted": "KILLED"}.get(status, "FAILED"))
