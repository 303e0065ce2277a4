"""Evaluation: its own runners, interval, duration in episodes or env steps, overrides, parallel, CLI."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import marl
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def cartpole(**evaluation):
    return (
        marl.PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
        .training(train_batch_size=64, num_epochs=1)
        .evaluation(**evaluation)
        .debugging(seed=0)
    )


def test_evaluation_runs_every_interval_with_the_current_weights():
    algo = cartpole(evaluation_interval=2, evaluation_duration=3).build()
    try:
        results = [algo.train() for _ in range(4)]
    finally:
        algo.stop()
    assert [("evaluation/episode_return_mean" in r) for r in results] == [False, True, False, True]
    for r in results[1::2]:
        assert r["evaluation/episodes"] == 3
        assert r["evaluation/weights_version"] == r["weights_version"]  # after this iteration's learn + sync
        assert r["evaluation/env_steps"] >= 3 * 8  # a greedy CartPole episode lasts at least 8 steps
        assert r["evaluation/policy_return_mean/default_policy"] == r["evaluation/episode_return_mean"]
        assert r["evaluation/episode_return_min"] <= r["evaluation/episode_return_mean"] <= r["evaluation/episode_return_max"]
        returns, lengths = r["evaluation/episode_returns"], r["evaluation/episode_lengths"]  # every episode
        assert len(returns) == len(lengths) == 3 and all(isinstance(n, int) and n >= 8 for n in lengths)
        assert returns == [float(n) for n in lengths]  # CartPole pays 1 per step: each return pairs with its length
        assert np.mean(returns) == pytest.approx(r["evaluation/episode_return_mean"])
        assert (min(returns), max(returns)) == (r["evaluation/episode_return_min"], r["evaluation/episode_return_max"])
        assert np.mean(lengths) == pytest.approx(r["evaluation/episode_len_mean"])


def test_episodes_unit_runs_exactly_the_first_episodes_started():
    algo = cartpole().env_runners(num_envs_per_env_runner=8).build()
    try:
        out = algo.evaluate(3)
        runner = algo.evaluation.built.group.local
        first_ids = sorted(e.id for e in runner._episodes)
    finally:
        algo.stop()
    assert out["evaluation/episodes"] == 3
    # with 8 env copies and 3 episodes wanted, 5 copies never step: each step is one of the 3 episodes'
    assert out["evaluation/env_steps"] == out["evaluation/episode_len_mean"] * 3
    assert len(first_ids) == 8


def test_env_steps_unit():
    algo = cartpole(evaluation_duration=50, evaluation_duration_unit="env_steps").build()
    try:
        out = algo.evaluate()
    finally:
        algo.stop()
    assert out["evaluation/env_steps"] == 50  # 25 lockstep steps of the 2 env copies


def test_evaluation_config_overrides_the_env_config():
    config = (
        marl.load_scenario("scenarios/simple_spread_ppo.yaml")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=25)
        .training(train_batch_size=150, minibatch_size=50, num_epochs=1)  # agent steps: 50 env steps x 3 agents
        .evaluation(evaluation_interval=1, evaluation_duration=2,
                    evaluation_config={"environment": {"env_config": {"max_cycles": 7}}, "env_runners": {"num_envs_per_env_runner": 1}})
    )
    algo = config.build()
    try:
        r = algo.train()
        assert algo.evaluation.built.group.local.num_envs == 1
    finally:
        algo.stop()
    assert r["episode_len_mean"] == 25 and r["evaluation/episode_len_mean"] == 7
    assert config.environment_cfg.env_config["N"] == 3  # merged key by key: the rest of env_config stays
    assert r["evaluation/episodes"] == 2


def test_evaluating_does_not_change_training():
    """Evaluation runners have their own envs and random streams: training is the same with or without them."""
    def weights(**evaluation):
        algo = cartpole(**evaluation).env_runners(observation_filter="mean_std").build()
        try:
            for _ in range(3):
                algo.train()
            return algo.get_weights()
        finally:
            algo.stop()

    plain = weights()
    evaluated = weights(evaluation_interval=1, evaluation_duration=2, evaluation_explore=True)
    assert plain["connectors"]["default_policy"]["mean_std"]["count"] == evaluated["connectors"]["default_policy"]["mean_std"]["count"] == 192
    for key, value in plain["modules"]["default_policy"].items():
        np.testing.assert_array_equal(value, evaluated["modules"]["default_policy"][key])


def test_remote_evaluation_runners_in_parallel_with_training(ray_session):
    config = cartpole(evaluation_interval=1, evaluation_duration=5, evaluation_num_env_runners=2,
                      evaluation_parallel_to_training=True)
    algo = config.build()
    try:
        results = [algo.train() for _ in range(2)]
        assert len(algo.evaluation.built.group.remote) == 2 and len(algo.runners.remote) == 0
    finally:
        algo.stop()
    for previous, r in zip([None] + results, results):
        assert r["evaluation/episodes"] == 5  # split 3 + 2 over the two runners
        assert len(r["evaluation/episode_returns"]) == len(r["evaluation/episode_lengths"]) == 5  # both runners' episodes
        # launched before this iteration trained: the weights of the previous iteration
        assert r["evaluation/weights_version"] == (1 if previous is None else previous["weights_version"])
        assert r["evaluation/weights_version"] < r["weights_version"]


def test_evaluation_section_errors_name_the_key():
    with pytest.raises(marl.ConfigError, match="evaluation_parallel_to_training.*evaluation_num_env_runners"):
        cartpole(evaluation_parallel_to_training=True).build()
    with pytest.raises(marl.ConfigError, match=r"'evaluation\.evaluation_config\.env_runners\.rollout_fragment_lenght' "
                                               r"\(did you mean 'rollout_fragment_length'"):
        cartpole(evaluation_config={"env_runners": {"rollout_fragment_lenght": 2}}).build()
    with pytest.raises(marl.ConfigError, match="set 'evaluation.evaluation_num_env_runners'"):
        cartpole(evaluation_config={"env_runners": {"num_env_runners": 2}}).build()


def marl_cli(*args):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)


def test_cli_evaluate_reports_checkpoint_problems_in_one_line(tmp_path):
    p = marl_cli("evaluate", str(tmp_path / "missing"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == f"marl: error: checkpoint '{tmp_path / 'missing'}' does not exist"
    (tmp_path / "future").mkdir()
    (tmp_path / "future" / "manifest.json").write_text(json.dumps({"schema_version": 5, "marl_version": "3.1"}))
    p = marl_cli("evaluate", str(tmp_path / "future"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "schema version 5 (written by marl 3.1)" in p.stderr and "reads schema versions 1 to 2" in p.stderr


@pytest.mark.slow
def test_cli_evaluate_on_a_trained_cartpole_checkpoint_reaches_450(tmp_path):
    run = tmp_path / "run"
    p = marl_cli("train", "scenarios/cartpole_ppo.yaml", "--output", str(run), "--quiet")
    assert p.returncode == 0, p.stderr
    p = marl_cli("evaluate", str(run / "checkpoint"), "--episodes", "10")
    assert p.returncode == 0, p.stderr
    values = dict(re.findall(r"^(evaluation/[\w/]+): (\S+)$", p.stdout, re.M))
    assert int(values["evaluation/episodes"]) == 10
    mean = float(values["evaluation/policy_return_mean/default_policy"])
    assert not math.isnan(mean) and mean >= 450, p.stdout


def test_dqn_evaluates_greedily_on_its_own_runner():
    config = (
        marl.DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8)
        .training(train_batch_size=16, num_steps_sampled_before_learning_starts=16, min_env_steps_per_iteration=32)
        .evaluation(evaluation_interval=1, evaluation_duration=2)
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        r = algo.train()
        runner = algo.evaluation.built.group.local
        module = runner.module["default_policy"]
    finally:
        algo.stop()
    assert r["evaluation/episodes"] == 2 and r["evaluation/episode_len_mean"] >= 8
    assert type(module).__name__ == "QMLP"


def test_sampled_evaluation_explores_where_training_is_on_its_schedule():
    """explore=True evaluation uses epsilon at the run's env steps, not the schedule's start (epsilon 1: random play)."""
    config = (
        marl.DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8)
        .training(train_batch_size=16, num_steps_sampled_before_learning_starts=16, min_env_steps_per_iteration=64,
                  epsilon=[[0, 1.0], [100, 0.02]])
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        algo.evaluate(num_episodes=1, explore=True)
        module = algo.evaluation.built.group.local.module["default_policy"]
        assert module.epsilon == 1.0  # nothing sampled yet: the schedule's start
        while algo.train()["env_steps_total"] < 100:
            pass
        algo.evaluate(num_episodes=1, explore=True)
        assert module.epsilon == pytest.approx(0.02)
    finally:
        algo.stop()
