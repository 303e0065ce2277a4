"""A user's module that registers an env trains on Ray runners with no PYTHONPATH set by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from marl.algorithms.ppo.config import PPOConfig
from marl.execution import user_code
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
MODULE = '''
import gymnasium as gym

import marl


def make(config):
    return gym.make("CartPole-v1")


marl.register_env("user_cartpole", make)
'''


def test_import_module_trains_with_a_ray_runner(tmp_path):
    (tmp_path / "user_envs.py").write_text(MODULE)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
    env["PYTHONPATH"] = str(ROOT)  # marl itself (the checkout); nothing for the user's module
    out = subprocess.run(
        [sys.executable, "-m", "marl.cli", "train", "--algo", "PPO", "--env", "user_cartpole", "--import", "user_envs",
         "env_runners.num_env_runners=1", "env_runners.num_cpus_per_env_runner=0.5", "env_runners.num_envs_per_env_runner=2",
         "env_runners.rollout_fragment_length=32", "training.train_batch_size=128", "stop.iterations=2",
         "--output", str(tmp_path / "run")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_S,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "env runners: 1 on 1 node(s)" in out.stdout and "iter    2" in out.stdout, out.stdout[-2000:]


def test_the_shipped_modules_are_the_users_not_installed_ones(tmp_path, monkeypatch):
    (tmp_path / "user_envs_b.py").write_text(MODULE.replace("user_cartpole", "user_cartpole_b"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.import_module("user_envs_b")
    cfg = PPOConfig().environment("user_cartpole_b")
    cfg.user_modules = ["user_envs_b", "numpy", "marl.envs"]
    assert user_code.shipped_modules(cfg) == [str((tmp_path / "user_envs_b.py").resolve())]
    assert user_code.job_runtime_env(cfg) == {"py_modules": [str((tmp_path / "user_envs_b.py").resolve())]}
    assert user_code.actor_options(cfg) == {}  # the job ships it
    user_code._JOB_SHIPPED.clear()
    opts = user_code.actor_options(cfg)  # Ray started by the caller: the directory on the workers' PYTHONPATH
    assert opts["runtime_env"]["env_vars"]["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path.resolve())


def test_a_worker_that_cannot_import_gets_a_hint():
    err = RuntimeError("The actor died because of an error raised in its creation task ... ModuleNotFoundError: No module named 'helpers'")
    hint = user_code.import_hint(err, "an env runner (a Ray worker)")
    assert "an env runner (a Ray worker) could not import module 'helpers'" in str(hint)
    assert "--import" in str(hint)
    assert user_code.import_hint(RuntimeError("something else"), "x") is None


def test_a_module_that_raises_on_import_is_one_line(tmp_path, monkeypatch, capsys):
    from marl import cli

    (tmp_path / "broken_user_mod.py").write_text("x = undefined_name + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code = cli.main(["train", "--algo", "PPO", "--env", "CartPole-v1", "--import", "broken_user_mod",
                     "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "--import broken_user_mod: importing it raised NameError: name 'undefined_name' is not defined" in err[0]
    assert "broken_user_mod.py:1" in err[0]
