"""The user surface as a person meets it: every `marl` command run as a subprocess, its files checked.

train without YAML, progress lines, run-directory files (config, results, CSV,
TensorBoard events, checkpoints), --resume, graph pictures, plots, envs, --help.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from marl.logging.tensorboard import read_scalars
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["env_runners.num_envs_per_env_runner=2", "env_runners.rollout_fragment_length=64",
         "training.train_batch_size=128", "training.minibatch_size=64", "training.num_epochs=2"]
# simple_tag's 4 agents: 128 env steps are 512 agent steps (train_batch_size counts agent steps)
SMALL_TAG = [*SMALL[:2], "training.train_batch_size=512", *SMALL[3:]]


def run(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_S, env=env)


def assert_real_png(path, min_size=(200, 200)):
    """A PNG that opens, has a real size and shows a drawing (not a blank canvas)."""
    from PIL import Image

    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        rgb = img.convert("RGB")
    assert rgb.width >= min_size[0] and rgb.height >= min_size[1], rgb.size
    colours = rgb.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20, "too few colours for a drawing"
    white = sum(n for n, c in colours if min(c) > 245)
    assert white < 0.99 * rgb.width * rgb.height, "the picture is (almost) blank"


def results_of(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "result.jsonl").read_text().splitlines()]


def test_train_without_yaml_writes_every_log_and_prints_progress(tmp_path):
    out = tmp_path / "run"
    p = run("train", "--algo", "ppo", "--env", "CartPole-v1", *SMALL, "stop.iterations=3",
            "stop.episode_return_mean=400", "checkpointing.checkpoint_frequency=2", "--output", str(out))
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stdout.splitlines() if line.startswith("iter")]
    assert len(lines) == 3
    for key in ("env_steps", "return", "env_steps/s", "elapsed 0:00:", "stop:"):
        assert key in lines[0], lines[0]
    assert "iterations 1/3 (33%)" in lines[0] and "return " in lines[0].split("stop:")[1]
    assert "iterations 3/3 (100%)" in lines[2] and "stopped: iterations 3 >= 3" in p.stdout

    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["algo"] == "PPO" and config["environment"]["env"] == "CartPole-v1"
    assert config["training"]["train_batch_size"] == 128 and config["checkpointing"]["checkpoint_frequency"] == 2
    results = results_of(out)
    assert [r["iteration"] for r in results] == [1, 2, 3]
    assert [r["env_steps_total"] for r in results] == [128, 256, 384]
    rows = list(csv.DictReader((out / "progress.csv").open()))
    assert [int(r["env_steps_total"]) for r in rows] == [128, 256, 384]
    # TensorBoard: every numeric result key, stepped by env steps.
    scalars = read_scalars(out)
    assert [step for step, _ in scalars["env_steps_per_s"]] == [128, 256, 384]
    assert np.allclose([v for _, v in scalars["losses/default_policy/vf_loss"]],
                       [r["losses/default_policy/vf_loss"] for r in results], rtol=1e-5)
    manifest = json.loads((out / "checkpoint" / "manifest.json").read_text())
    assert manifest["iteration"] == 3  # written at iteration 2, then again at the end


def test_periodic_checkpoint_without_one_at_the_end_under_marl_runs_dir(tmp_path):
    env = dict(os.environ, MARL_RUNS_DIR=str(tmp_path / "all_runs"))
    p = run("train", "--algo", "PPO", "--env", "CartPole-v1", *SMALL, "stop.iterations=3",
            "checkpointing.checkpoint_frequency=2", "checkpointing.checkpoint_at_end=false", "--quiet", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    (out,) = (tmp_path / "all_runs").iterdir()
    assert out.name.startswith("PPO-CartPole-v1-")
    assert json.loads((out / "checkpoint" / "manifest.json").read_text())["iteration"] == 2


def test_resume_continues_counters_and_logs_from_the_last_checkpoint(tmp_path):
    out = tmp_path / "run"
    # Stopped at iteration 3 with its last checkpoint at iteration 2 (as after a crash).
    p = run("train", "scenarios/simple_tag_ppo.yaml", *SMALL_TAG, "stop.iterations=3", "checkpointing.checkpoint_frequency=2",
            "checkpointing.checkpoint_at_end=false", "--output", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    before = results_of(out)
    p = run("train", "--resume", str(out), "stop.iterations=5", "checkpointing.checkpoint_at_end=true")
    assert p.returncode == 0, p.stderr
    assert "resumed from" in p.stdout and "at iteration 2, 256 env steps" in p.stdout
    assert [line.split()[1] for line in p.stdout.splitlines() if line.startswith("iter")] == ["3", "4", "5"]

    after = results_of(out)
    assert [r["iteration"] for r in after] == [1, 2, 3, 4, 5]  # the old iteration 3 was replaced
    assert after[:2] == before[:2]
    assert [r["env_steps_total"] for r in after] == [128, 256, 384, 512, 640]
    assert [r["counters/learner_updates"] for r in after] == [1, 2, 3, 4, 5]
    assert after[2]["weights_version"] > before[1]["weights_version"]
    assert len(list(csv.DictReader((out / "progress.csv").open()))) == 5
    assert yaml.safe_load((out / "config.yaml").read_text())["stop"]["iterations"] == 5
    final = json.loads((out / "checkpoint" / "manifest.json").read_text())
    assert final["iteration"] == 5 and final["counters"]["env_steps_sampled"] == 640


def test_resume_continues_from_the_trained_weights(tmp_path):
    """A resumed CartPole run acts like the policy it stopped with (~150), not like a fresh one (~20)."""
    out = tmp_path / "run"
    p = run("train", "scenarios/cartpole_ppo.yaml", "stop.episode_return_mean=150", "--output", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    stopped_at = results_of(out)[-1]
    assert stopped_at["episode_return_mean"] >= 150
    p = run("train", "--resume", str(out), f"stop.iterations={stopped_at['iteration'] + 1}", "--quiet")
    assert p.returncode == 0, p.stderr
    first = results_of(out)[-1]
    assert first["iteration"] == stopped_at["iteration"] + 1
    assert first["episode_return_mean"] > 100, first["episode_return_mean"]


def test_resume_needs_a_run_directory_with_a_checkpoint(tmp_path):
    p = run("train", "--resume", str(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "not a run directory" in p.stderr
    p = run("train", "scenarios/cartpole_ppo.yaml", "--algo", "PPO")
    assert p.returncode == 2 and "either a scenario file or --algo" in p.stderr
    p = run("train", "--algo", "NOPE", "--env", "CartPole-v1")
    assert p.returncode == 2 and "invalid choice" in p.stderr


def test_graph_prints_operators_and_edges_and_draws_the_dag(tmp_path):
    png = tmp_path / "pics" / "dag.png"
    p = run("graph", "scenarios/cartpole_ppo.yaml", "training.train_batch_size=1000", "-o", str(png))
    assert p.returncode == 0, p.stderr
    assert "concat: concat(min_agent_steps=1000)" in p.stdout and "learn --results--> sync_weights" in p.stdout
    assert f"picture: {png}" in p.stdout
    assert_real_png(png, min_size=(300, 400))
    # Without -o the picture is named after the source, in the working directory.
    p = run("graph", "--algo", "ppo", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "concat: concat(min_agent_steps=4096)" in p.stdout
    assert_real_png(tmp_path / "PPO_workflow.png")


def test_plot_overlays_runs(tmp_path):
    dirs = []
    for seed in (0, 1):
        out = tmp_path / f"tag{seed}"
        p = run("train", "scenarios/simple_tag_ppo.yaml", *SMALL_TAG, "stop.iterations=2", f"debugging.seed={seed}",
                "--output", str(out), "--quiet")
        assert p.returncode == 0, p.stderr
        dirs.append(str(out))
    p = run("plot", *dirs, "-o", str(tmp_path / "plots"))
    assert p.returncode == 0, p.stderr
    written = p.stdout.split()
    assert [Path(w).name for w in written] == ["returns.png", "throughput.png"]
    assert_real_png(tmp_path / "plots" / "returns.png", min_size=(800, 300))  # 3 panels: all agents, predator, prey
    assert_real_png(tmp_path / "plots" / "throughput.png", min_size=(800, 300))
    # One run: the PNGs go into its directory.
    p = run("plot", dirs[0])
    assert p.returncode == 0, p.stderr
    assert_real_png(Path(dirs[0]) / "returns.png")
    p = run("plot", str(tmp_path))
    assert p.returncode == 2 and "not a marl run directory" in p.stderr


def test_envs_lists_families_and_registered_names(tmp_path):
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium, marl\nmarl.register_env('my_cartpole', lambda cfg: gymnasium.make('CartPole-v1'))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = run("envs", "--import", "my_envs", env=env)
    assert p.returncode == 0, p.stderr
    assert "mpe2.simple_spread_v3" in p.stdout and "pettingzoo.classic.tictactoe_v3" in p.stdout
    assert "gymnasium.classic_control" in p.stdout and "CartPole-v1" in p.stdout
    assert "register_env (1): my_cartpole" in p.stdout
    assert "copies: copies.<any id above>" in p.stdout  # N independent copies of a Gymnasium env (marl.envs.copies)
    p = run("envs", "--family", "pettingzoo")
    assert p.returncode == 0 and "CartPole-v1" not in p.stdout and "mpe2.simple_tag_v3" in p.stdout


@pytest.mark.parametrize("command", ["train", "evaluate", "graph", "plot", "envs", "defaults", "reference", "serve", None])
def test_help_documents_every_option(command):
    from marl.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    sub = parser if command is None else commands.choices[command]
    p = run(*([command] if command else []), "--help")
    assert p.returncode == 0, p.stderr
    for action in sub._actions:
        names = action.option_strings or [action.metavar or action.dest]
        for name in names:
            assert name in p.stdout, f"`marl {command} --help` does not mention {name}"
        if action.dest not in ("help", "command"):
            assert action.help and action.help in " ".join(p.stdout.split()), f"{names} has no help text"
    if command is None:
        for name in commands.choices:
            assert name in p.stdout, f"`marl --help` does not list `{name}`"
