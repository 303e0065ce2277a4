"""Run directories at a filesystem URI (`--output`, `--resume`, `checkpointing.storage`): staged locally,
uploaded after each checkpoint and at the end; tested on fsspec's in-memory filesystem and a file:// URI."""

from __future__ import annotations

import json

import fsspec
import pytest

from marl.cli.main import main
from marl.logging.storage import RunStorage

TINY = ["--algo", "PPO", "--env", "CartPole-v1", "env_runners.num_envs_per_env_runner=1",
        "env_runners.rollout_fragment_length=32", "training.train_batch_size=32", "training.minibatch_size=32",
        "training.num_epochs=1", "loggers.tensorboard=false"]


@pytest.fixture
def memory():
    fs = fsspec.filesystem("memory")
    yield fs
    if fs.exists("/runs"):
        fs.rm("/runs", recursive=True)


@pytest.fixture(autouse=True)
def staging(tmp_path, monkeypatch):
    monkeypatch.setenv("MARL_STAGING_DIR", str(tmp_path / "staging"))
    return tmp_path / "staging"


def rows(fs, root: str) -> list[int]:
    return [json.loads(line)["iteration"] for line in fs.cat_file(f"{root}/result.jsonl").decode().splitlines()]


def test_a_run_at_a_memory_uri_is_uploaded_and_resumes_from_there(memory, staging, capsys):
    assert main(["train", *TINY, "stop.iterations=2", "checkpointing.checkpoint_frequency=1", "--output", "memory://runs/a"]) == 0
    assert rows(memory, "/runs/a") == [1, 2]
    manifest = json.loads(memory.cat_file("/runs/a/checkpoint/manifest.json"))
    assert manifest["iteration"] == 2 and memory.exists("/runs/a/config.yaml")
    assert not memory.exists("/runs/a/checkpoint.new") and list(staging.iterdir()) == []  # staging removed
    out = capsys.readouterr().out
    assert "run directory: memory://runs/a (staged in " in out and "checkpoint: memory://runs/a/checkpoint" in out
    assert main(["train", "--resume", "memory://runs/a", "stop.iterations=4"]) == 0
    assert rows(memory, "/runs/a") == [1, 2, 3, 4]
    assert json.loads(memory.cat_file("/runs/a/checkpoint/manifest.json"))["iteration"] == 4
    assert "resumed from" in capsys.readouterr().out


def test_checkpointing_storage_names_the_run_under_a_uri_root(memory):
    assert main(["train", *TINY, "stop.iterations=1", "checkpointing.storage=memory://runs/root", "--quiet"]) == 0
    (run,) = memory.ls("/runs/root", detail=False)
    assert run.split("/")[-1].startswith("PPO-CartPole-v1-") and memory.exists(f"{run}/checkpoint/manifest.json")


def test_a_file_uri_is_a_local_folder(tmp_path):
    target = tmp_path / "shared" / "run"
    assert main(["train", *TINY, "stop.iterations=1", "--quiet", "--output", f"file://{target}"]) == 0
    assert (target / "checkpoint" / "manifest.json").is_file() and (target / "result.jsonl").is_file()
    assert main(["train", "--resume", f"file://{target}", "stop.iterations=2", "--quiet"]) == 0
    assert [json.loads(line)["iteration"] for line in (target / "result.jsonl").read_text().splitlines()] == [1, 2]


def test_an_interrupted_upload_leaves_a_whole_checkpoint(tmp_path, memory):
    """A kill after `checkpoint.new/` was complete but before it replaced `checkpoint/`: resume takes the new one;
    a checkpoint's upload replaces the old one whole (a file only the old one had is gone)."""
    local = tmp_path / "local"
    (local / "checkpoint" / "runners").mkdir(parents=True)
    (local / "config.yaml").write_text("a: 1\n")
    (local / "checkpoint" / "manifest.json").write_text('{"iteration": 1}')
    (local / "checkpoint" / "runners" / "1.json").write_text("{}")
    storage = RunStorage("memory://runs/u", local)
    storage.sync()
    assert memory.exists("/runs/u/checkpoint/runners/1.json")
    (local / "checkpoint" / "runners" / "1.json").unlink()
    (local / "checkpoint" / "manifest.json").write_text('{"iteration": 2}')
    storage.sync()
    assert not memory.exists("/runs/u/checkpoint/runners/1.json")
    assert json.loads(memory.cat_file("/runs/u/checkpoint/manifest.json")) == {"iteration": 2}
    # the state a kill between the upload and the swap leaves
    memory.copy("/runs/u/checkpoint", "/runs/u/checkpoint.new", recursive=True)
    memory.pipe_file("/runs/u/checkpoint.new/manifest.json", b'{"iteration": 3}')
    memory.rm("/runs/u/checkpoint", recursive=True)
    fetched = RunStorage("memory://runs/u", tmp_path / "fetched")
    fetched.download()
    assert json.loads((tmp_path / "fetched" / "checkpoint" / "manifest.json").read_text()) == {"iteration": 3}
    assert (tmp_path / "fetched" / "config.yaml").read_text() == "a: 1\n"


@pytest.mark.parametrize("args, message", [
    (["--output", "nosuchfs://bucket/run"], "--output nosuchfs://bucket/run: Protocol not known: nosuchfs"),
    (["checkpointing.storage=nosuchfs://bucket"], "checkpointing.storage nosuchfs://bucket: Protocol not known"),
])
def test_an_unknown_filesystem_is_one_line(args, message, capsys, tmp_path):
    assert main(["train", *TINY, "stop.iterations=1", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"marl: error: {message}") and len(err.strip().splitlines()) == 1


def test_resuming_a_uri_without_a_run_is_one_line(memory, capsys):
    assert main(["train", "--resume", "memory://runs/nothing"]) == 2
    assert capsys.readouterr().err.strip() == "marl: error: --resume memory://runs/nothing: is not a run directory (it has no config.yaml)"


def test_a_run_in_a_ray_jobs_temporary_working_dir_says_so(tmp_path, monkeypatch, capsys):
    job_dir = tmp_path / "session" / "runtime_resources" / "working_dir_files" / "_ray_pkg_abc"
    job_dir.mkdir(parents=True)
    monkeypatch.chdir(job_dir)
    monkeypatch.delenv("MARL_RUNS_DIR", raising=False)
    assert main(["train", *TINY, "stop.iterations=1", "--quiet"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "temporary working directory" in line]
    assert len(notes) == 1 and "give --output" in notes[0] and str(job_dir) in notes[0]
    assert main(["train", *TINY, "stop.iterations=1", "--quiet", "--output", str(tmp_path / "kept")]) == 0
    assert "temporary working directory" not in capsys.readouterr().err
