"""The user's modules, named once at training time (`--import`, a scenario's `imports:`), are imported again by every
command and loader that reads the run: `--resume`, `marl evaluate`, `marl graph`, `Algorithm.from_checkpoint`,
`load_module`, Tune trials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marl.config.scenario import config_from_dict
from marl.errors import ConfigError
from marl.execution.user_code import import_user_modules
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
MODULE = '''
import gymnasium as gym

import marl

marl.register_env("{name}", lambda config: gym.make("CartPole-v1"))
'''
TINY = ["stop.iterations=1", "training.train_batch_size=64", "training.minibatch_size=32", "training.num_epochs=1",
        "env_runners.rollout_fragment_length=32"]


def marl_cli(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(ROOT)  # marl itself; the user's module is found only through the working directory
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_S, env=env)


@pytest.mark.slow
def test_modules_imported_at_training_time_are_imported_again_everywhere(tmp_path):
    (tmp_path / "my_envs.py").write_text(MODULE.format(name="my_game"))
    run = tmp_path / "run"
    p = marl_cli(tmp_path, "train", "--algo", "PPO", "--env", "my_game", "--import", "my_envs", "--output", str(run),
                 "--quiet", *TINY)
    assert p.returncode == 0, p.stderr
    assert "imports:\n- my_envs" in (run / "config.yaml").read_text()
    assert json.loads((run / "checkpoint" / "manifest.json").read_text())["imports"] == ["my_envs"]

    p = marl_cli(tmp_path, "evaluate", str(run / "checkpoint"), "--episodes", "1")
    assert p.returncode == 0, p.stderr
    assert "evaluation/episodes: 1" in p.stdout
    p = marl_cli(tmp_path, "graph", str(run / "config.yaml"), "--no-png")
    assert p.returncode == 0 and "sample" in p.stdout, p.stderr
    p = marl_cli(tmp_path, "train", "--resume", str(run), "stop.iterations=2", "--quiet")
    assert p.returncode == 0, p.stderr
    assert json.loads((run / "result.jsonl").read_text().splitlines()[-1])["iteration"] == 2
    code = (f"import marl; algo = marl.Algorithm.from_checkpoint({str(run / 'checkpoint')!r}, "
            "overrides=['env_runners.num_env_runners=0']); print('iteration', algo.iteration); algo.stop(); "
            f"print(type(marl.load_module({str(run / 'checkpoint')!r})).__name__)")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTHONPATH")}
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_S,
                       env={**env, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert "iteration 2" in p.stdout

    # Elsewhere, where the module cannot be found: one line naming it, and the two ways to make it found.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = marl_cli(elsewhere, "evaluate", str(run / "checkpoint"), "--episodes", "1")
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "no module named 'my_envs'" in p.stderr and "--import" in p.stderr and "PYTHONPATH" in p.stderr


@pytest.mark.slow
def test_a_scenario_imports_key_works_for_marl_train(tmp_path):
    (tmp_path / "scenario_envs.py").write_text(MODULE.format(name="scenario_game"))
    scenario = tmp_path / "game.yaml"
    scenario.write_text("algo: PPO\nimports: [scenario_envs]\nenvironment: {env: scenario_game}\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()  # the module sits beside the scenario file, not in the working directory
    p = marl_cli(elsewhere, "train", str(scenario), "--output", str(tmp_path / "run"), "--quiet", *TINY)
    assert p.returncode == 0, p.stderr
    assert "imports:\n- scenario_envs" in (tmp_path / "run" / "config.yaml").read_text()


def test_scenario_imports_are_checked_imported_and_recorded(tmp_path, monkeypatch):
    (tmp_path / "dict_envs.py").write_text(MODULE.format(name="dict_game"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    config = config_from_dict({"algo": "PPO", "imports": ["dict_envs"], "environment": {"env": "dict_game"}})
    assert config.user_modules == ["dict_envs"] and config.to_dict()["imports"] == ["dict_envs"]
    assert "imports" not in config_from_dict({"algo": "PPO"}).to_dict()
    with pytest.raises(ConfigError, match="'imports' must be a list of module names"):
        config_from_dict({"algo": "PPO", "imports": [3]})
    with pytest.raises(ConfigError, match=r"imports: nowhere_mod: no module named 'nowhere_mod' here: pass --import"):
        config_from_dict({"algo": "PPO", "imports": ["nowhere_mod"]})
    (tmp_path / "raising_mod.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"--import raising_mod: importing it raised RuntimeError: boom \(.*raising_mod.py:1\)"):
        import_user_modules(["raising_mod"])


@pytest.mark.slow
def test_a_scenario_imports_key_works_in_tune_trials(tmp_path, ray_session):
    from ray import tune

    from marl.tune import trainable

    (tmp_path / "tune_envs.py").write_text(MODULE.format(name="tune_game"))
    scenario = tmp_path / "tune_game.yaml"
    scenario.write_text("algo: PPO\nimports: [tune_envs]\nenvironment: {env: tune_game}\n"
                        "training: {train_batch_size: 64, minibatch_size: 32, num_epochs: 1}\n"
                        "env_runners: {rollout_fragment_length: 32}\n")
    tuner = tune.Tuner(trainable(scenario), param_space={"training.lr": 1e-3},
                       run_config=tune.RunConfig(stop={"training_iteration": 1}, storage_path=str(tmp_path / "tune"), verbose=0))
    grid = tuner.fit()
    assert grid[0].error is None, grid[0].error
    assert grid[0].metrics["training_iteration"] == 1


def test_a_suite_records_its_own_its_scenarios_and_the_command_lines_imports(tmp_path, monkeypatch):
    from marl.experiment.suite import load_suite

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "task_envs.py").write_text(MODULE.format(name="suite_game"))
    (tmp_path / "cli_envs.py").write_text("")
    (tasks / "game.yaml").write_text("algo: PPO\nimports: [task_envs]\nenvironment: {env: suite_game}\n")
    (tmp_path / "suite.yaml").write_text("name: s\nenv_steps: 64\ntasks: {game: {scenario: tasks/game.yaml}}\n"
                                         "algorithms: [PPO]\n")
    suite = load_suite(tmp_path / "suite.yaml", extra_imports=["cli_envs"])
    assert suite.imports == ["cli_envs", "task_envs"]
    config = suite.runs[0].config()
    assert config.user_modules == ["cli_envs", "task_envs"] and config.to_dict()["imports"] == ["cli_envs", "task_envs"]
