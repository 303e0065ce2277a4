"""Loggers a scenario turns on (`loggers` section): MLflow and W&B, read back through each library's own API."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest

from marl.algorithms import ConfigError
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["env_runners.num_envs_per_env_runner=2", "env_runners.rollout_fragment_length=64",
         "training.train_batch_size=128", "training.num_epochs=1", "loggers.tensorboard=false"]


def _train(run_dir: Path, *overrides: str, iterations: int = 3, resume: bool = False):
    from marl.algorithms import load_scenario
    from marl.runtime.run_loop import config_for_resume, train_run

    if resume:
        config = config_for_resume(run_dir, [f"stop.iterations={iterations}"])
    else:
        config = load_scenario(ROOT / "scenarios/cartpole_ppo.yaml", [*SMALL, f"stop.iterations={iterations}", *overrides])
    train_run(config, run_dir, resume=resume, echo=None)
    return [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]


def test_mlflow_logs_config_metrics_at_env_steps_and_the_checkpoint(tmp_path):
    pytest.importorskip("mlflow", reason="the mlflow extra (pip install 'marl[mlflow]') is not installed")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'store.db'}"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rows = _train(run_dir, "loggers.mlflow=true", f"loggers.mlflow_tracking_uri={uri}", "loggers.mlflow_experiment=exp",
                  "training.lr=0.00123")
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("exp")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert float(run.data.params["training.lr"]) == 0.00123 and run.data.params["environment.env"] == "CartPole-v1"
    history = client.get_metric_history(run.info.run_id, "episode_return_mean")
    assert [(m.step, m.value) for m in history] == [(r["env_steps_total"], pytest.approx(r["episode_return_mean"])) for r in rows]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "losses/default_policy/policy_loss")] == [128, 256, 384]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "checkpoint"} <= artifacts
    assert "checkpoint/manifest.json" in {a.path for a in client.list_artifacts(run.info.run_id, "checkpoint")}
    assert (tmp_path / "mlartifacts").is_dir() and not (Path.cwd() / "mlruns").exists()  # artifacts beside the store

    # A resumed run continues the same MLflow run; rows from before the checkpoint are not logged twice.
    rows = _train(run_dir, iterations=5, resume=True)
    (again,) = client.search_runs([experiment.experiment_id])
    assert again.info.run_id == run.info.run_id and again.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "env_steps_total")
    assert sorted(m.step for m in history) == [r["env_steps_total"] for r in rows] == [128, 256, 384, 512, 640]


def test_mlflow_default_store_is_in_the_run_directory(tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="the mlflow extra (pip install 'marl[mlflow]') is not installed")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _train(run_dir, "loggers.mlflow=true", iterations=1)
    client = MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("marl").experiment_id])
    assert client.get_metric_history(run.info.run_id, "env_steps_total")[0].value == 128
    assert (run_dir / "mlartifacts").is_dir()


def test_an_unreachable_mlflow_store_is_one_config_error(tmp_path):
    pytest.importorskip("mlflow", reason="the mlflow extra (pip install 'marl[mlflow]') is not installed")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(ConfigError, match=r"^loggers.mlflow: cannot log to 'nosuchscheme://x'"):
        _train(run_dir, "loggers.mlflow=true", "loggers.mlflow_tracking_uri=nosuchscheme://x", iterations=1)


def _wandb_records(path: Path):
    """The records of a W&B transaction log (run-*.wandb): W&B's protobuf `Record`s in LevelDB log framing."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        pending += chunk
        if kind in (1, 4):  # FULL, LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def test_wandb_offline_logs_config_and_metrics_against_env_steps(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="the wandb extra (pip install 'marl[wandb]') is not installed")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rows = _train(run_dir, "loggers.wandb=true", "loggers.wandb_mode=offline", "loggers.wandb_project=proj",
                  "training.lr=0.00123")
    run_id = json.loads((run_dir / "loggers.json").read_text())["wandb"]
    (log,) = (run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    deadline = time.time() + HANG_S  # W&B's core process may still be writing the log when run.finish() returns
    while time.time() < deadline and "exit" not in [r.WhichOneof("record_type") for r in _wandb_records(log)]:
        time.sleep(0.2)
    config, history, artifacts, metrics = {}, [], [], {}
    for record in _wandb_records(log):
        kind = record.WhichOneof("record_type")
        if kind == "config":
            for item in record.config.update:
                config[item.key] = json.loads(item.value_json)
        elif kind == "history":
            history.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item})
        elif kind == "artifact":
            artifacts.append(record.artifact)
        elif kind == "metric":
            metrics[record.metric.glob_name or record.metric.name] = record.metric.step_metric
        elif kind == "run":
            assert record.run.project == "proj" and record.run.run_id == run_id
            for item in record.run.config.update:
                config[item.key] = json.loads(item.value_json)
    assert "training" in config, sorted(config)
    assert config["training"]["lr"] == 0.00123 and config["environment"]["env"] == "CartPole-v1"
    assert [h["env_steps_total"] for h in history] == [r["env_steps_total"] for r in rows]
    assert [h["episode_return_mean"] for h in history] == pytest.approx([r["episode_return_mean"] for r in rows])
    assert metrics.get("*") == "env_steps_total"  # every metric is plotted against env steps
    assert [a.type for a in artifacts] == ["model"] and artifacts[0].name == f"checkpoint-{run_id}"
    assert "manifest.json" in {f.path for f in artifacts[0].manifest.contents}


def test_loggers_section_rejects_bad_values():
    from marl import PPOConfig

    with pytest.raises(ConfigError, match=r"'loggers.wandb_mode' must be one of \['online', 'offline'\], got 'cloud'"):
        PPOConfig().loggers(wandb_mode="cloud")
    with pytest.raises(ConfigError, match=r"unknown key 'loggers.mlfow' \(did you mean 'mlflow'\?\)"):
        PPOConfig().loggers(mlfow=True)


def test_csv_and_tensorboard_can_be_turned_off(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _train(run_dir, "loggers.csv=false", iterations=1)
    assert (run_dir / "result.jsonl").is_file()
    assert not (run_dir / "progress.csv").exists() and not list(run_dir.glob("events.out.tfevents.*"))
