"""The `marl` command as a user runs it: subprocesses, files on disk, error messages."""

from __future__ import annotations

import csv
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import yaml  # PyYAML comes with omegaconf
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=HANG_S)


def test_train_writes_a_run_directory(tmp_path):
    out = tmp_path / "run"
    p = run("train", "scenarios/simple_tag_ppo.yaml", "stop.iterations=2", "training.train_batch_size=1024", "training.minibatch_size=128",
            "env_runners.rollout_fragment_length=32", "--output", str(out))
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("iter")]
    assert len(lines) == 2 and "env_steps" in lines[0]
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["algo"] == "PPO" and config["training"]["train_batch_size"] == 1024
    assert config["multi_agent"]["policy_mapping"] == {"adversary_*": "predator", "*": "prey"}
    results = [json.loads(ln) for ln in (out / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in results] == [1, 2]
    assert results[-1]["env_steps_total"] == 512  # 2 x 1,024 agent steps of 4 agents
    assert "policy_return_mean/predator" in results[0] and "losses/prey/policy_loss" in results[0]
    rows = list(csv.DictReader((out / "progress.csv").open()))
    assert len(rows) == 2 and int(rows[1]["env_steps_total"]) == 512
    assert (out / "checkpoint" / "manifest.json").is_file()


def test_default_run_directory_is_named_after_the_scenario(tmp_path):
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text("algo: PPO\nenvironment: {env: CartPole-v1}\ntraining: {train_batch_size: 64, num_epochs: 1}\n"
                        "env_runners: {num_envs_per_env_runner: 2, rollout_fragment_length: 32}\nstop: {iterations: 1}\n")
    p = run("train", str(scenario), "--quiet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and re.fullmatch(r"tiny-\d{8}-\d{6}", runs[0].name)


def test_evaluate_prints_per_policy_returns(tmp_path):
    out = tmp_path / "run"
    assert run("train", "scenarios/simple_tag_ppo.yaml", "stop.iterations=1", "training.train_batch_size=64", "training.minibatch_size=64",
               "env_runners.rollout_fragment_length=8", "--output", str(out), "--quiet").returncode == 0
    p = run("evaluate", str(out / "checkpoint"), "--episodes", "2")
    assert p.returncode == 0, p.stderr
    assert "evaluation/policy_return_mean/predator" in p.stdout and "evaluation/episodes: 2" in p.stdout
    assert "episode_returns" not in p.stdout  # the per-episode lists are for result.jsonl, not this summary


def test_evaluate_plays_a_self_play_checkpoint_against_random(tmp_path):
    out = tmp_path / "run"
    assert run("train", "scenarios/connect_four_self_play.yaml", "stop.env_steps_total=200", "training.train_batch_size=128",
               "training.minibatch_size=64", "--output", str(out), "--quiet").returncode == 0
    p = run("evaluate", str(out / "checkpoint"), "--episodes", "4", "--opponent", "random")
    assert p.returncode == 0, p.stderr
    assert "4 episodes against random" in p.stdout and "evaluation/self_play/games: 4" in p.stdout
    assert re.search(r"evaluation/self_play/win_rate: [01]\.\d\d", p.stdout)
    bad = run("evaluate", str(out / "checkpoint"), "--episodes", "1", "--opponent", "alphazero")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--opponent 'alphazero' cannot be imported" in bad.stderr and "Traceback" not in bad.stderr


def test_graph_prints_operators_and_edges():
    p = run("graph", "scenarios/cartpole_ppo.yaml", "--no-png")
    assert p.returncode == 0, p.stderr
    assert "concat: concat(min_agent_steps=2048)" in p.stdout
    assert "learn --results--> sync_weights" in p.stdout


def test_bad_key_is_one_clear_line_without_traceback():
    p = run("train", "scenarios/cartpole_ppo.yaml", "training.lrr=0.1")
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert "training.lrr" in p.stderr and "did you mean 'lr'" in p.stderr


def test_unknown_env_is_one_clear_line(tmp_path):
    p = run("train", "scenarios/cartpole_ppo.yaml", "environment.env=NoSuchEnv-v9", "--output", str(tmp_path / "r"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "NoSuchEnv-v9" in p.stderr


def test_readme_commands_match_ci():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    setup_and_train, setup_and_test = commands[0].strip(), commands[1].strip()
    assert setup_and_train.endswith("marl train scenarios/simple_spread_ppo.yaml")
    ci = (ROOT / ".ci" / "run").read_text()
    assert setup_and_test in ci, "'.ci/run' must run the README's test command"


def test_a_module_that_does_not_fit_the_algorithms_columns_is_one_line(tmp_path):
    """A policy-only network (no value head) under PPO, which records values: one line naming the module."""
    p = run("train", "--algo", "PPO", "--env", "CartPole-v1", "training.model.value_function=false",
            "stop.iterations=1", "--output", str(tmp_path / "run"))
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "records value predictions, but module ActorCriticMLP" in p.stderr


def test_options_and_overrides_mix_in_any_order(tmp_path):
    out = tmp_path / "run"
    p = run("train", "training.train_batch_size=512", "--output", str(out), "scenarios/cartpole_ppo.yaml",
            "--quiet", "stop.iterations=1")
    assert p.returncode == 0, p.stderr
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["training"]["train_batch_size"] == 512 and config["stop"]["iterations"] == 1
    g = run("graph", "--no-png", "scenarios/cartpole_dqn.yaml", "--algo", "DQN", "training.n_step=2")
    assert g.returncode == 2 and "either a scenario file or --algo" in g.stderr  # read as one command line
    g = run("graph", "--no-png", "scenarios/cartpole_dqn.yaml", "training.n_step=2")
    assert g.returncode == 0 and "n_step=2" in g.stdout, g.stderr


def test_a_misspelt_option_or_a_second_scenario_is_one_line(tmp_path):
    p = run("train", "scenarios/cartpole_ppo.yaml", "--outptu", str(tmp_path), "stop.iterations=1")
    assert p.returncode == 2 and "unrecognized arguments: --outptu" in p.stderr and "Traceback" not in p.stderr
    p = run("train", "scenarios/cartpole_ppo.yaml", "scenarios/cartpole_dqn.yaml")
    assert p.returncode == 2 and "one scenario file at most" in p.stderr and "Traceback" not in p.stderr
    p = run("evaluate", "--episodes", "2", str(tmp_path), "extra")
    assert p.returncode == 2 and "unrecognized arguments: extra" in p.stderr


def test_train_imports_a_users_env_module(tmp_path):
    (tmp_path / "my_envs.py").write_text(
        "import marl\n"
        "from marl.envs import make_env\n"
        "marl.register_env('MyCart', lambda cfg: make_env('CartPole-v1', cfg))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "marl.cli", "train", "--algo", "PPO", "--env", "MyCart", "stop.iterations=1",
           "training.train_batch_size=256", "--output", str(tmp_path / "run")]
    without = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=HANG_S, env=env)
    assert without.returncode == 2 and "MyCart" in without.stderr and "Traceback" not in without.stderr
    with_import = subprocess.run(cmd + ["--import", "my_envs"], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S, env=env)
    assert with_import.returncode == 0, with_import.stderr
