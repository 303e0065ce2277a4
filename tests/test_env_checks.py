"""Env outputs that would crash the runner are named in one line even without `debugging.validate_env`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from marl import cli

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def scenario(tmp_path: Path, fault: str) -> Path:
    path = tmp_path / f"{fault}.yaml"
    path.write_text(
        "algo: PPO\n"
        f"environment: {{env: tests.bad_envs, env_config: {{fault: {fault}}}}}\n"
        "env_runners: {num_envs_per_env_runner: 1, rollout_fragment_length: 8}\n"
        "training: {train_batch_size: 8, num_epochs: 1}\n"
        "stop: {iterations: 1}\n"
    )
    return path


@pytest.mark.parametrize("fault,expected", [
    ("unknown_obs_agent", "returned an observation for unknown agent 'intruder' at episode step 3; possible agents: ['a0', 'a1']"),
    ("unknown_reward", "returned a reward for unknown agent 'ghost' at episode step 3"),
    ("unknown_flag_agent", "returned a 'terminateds' flag for unknown agent 'a7' at episode step 3"),
    ("obs_shape", "the observation of agent 'a1' has shape (4,); its observation space Box(-1.0, 1.0, (3,), float32) has shape (3,)"),
])
def test_boundary_faults_without_validate_env(fault, expected, tmp_path, capsys):
    code = cli.main(["train", str(scenario(tmp_path, fault)), "--quiet", "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert expected in err[0]


def test_nan_observations_pass_without_validate_env(tmp_path, capsys):
    """NaN is looked for only under debugging.validate_env (a full scan of every observation)."""
    assert cli.main(["train", str(scenario(tmp_path, "nan_obs")), "--quiet", "--output", str(tmp_path / "run")]) == 0
