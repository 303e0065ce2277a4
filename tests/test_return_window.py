"""`stop.episode_return_window`: the return stop rule over the last N episodes, across iterations (RLlib's rule)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from marl.config import stop_reason
from marl.config.scenario import config_from_dict
from marl.execution.metrics import SharedMetrics
from marl.workflow.report import ResultBuilder


def _builder(window: int) -> ResultBuilder:
    config = config_from_dict({"algo": "PPO", "environment": {"env": "CartPole-v1"}},
                              [f"stop.episode_return_window={window}", "stop.episode_return_mean=100"])
    return ResultBuilder(SimpleNamespace(config=config, metrics=SharedMetrics()))


def _iteration(builder: ResultBuilder, returns: list[float]) -> dict:
    builder.ctx.metrics.episodes = [{"return": r, "length": 1, "policy_returns": {}} for r in returns]
    return {**builder.build([], 0.0, 1.0), "iteration": 1}


def test_window_mean_spans_iterations_and_survives_a_checkpoint():
    builder = _builder(window=3)
    first = _iteration(builder, [10.0, 20.0])
    assert first["episode_return_mean"] == 15.0 and first["episode_return_window_mean"] == 15.0
    second = _iteration(builder, [200.0, 300.0])  # the iteration's mean is 250; the last 3 episodes' is 173.3
    assert second["episode_return_mean"] == 250.0
    assert second["episode_return_window_mean"] == pytest.approx((20 + 200 + 300) / 3)
    none = _iteration(builder, [])  # no episode finished: the window still holds the last 3
    assert math.isnan(none["episode_return_mean"]) and none["episode_return_window_mean"] == pytest.approx(520 / 3)

    restored = _builder(window=3)
    restored.set_state(builder.get_state())
    assert _iteration(restored, [0.0])["episode_return_window_mean"] == pytest.approx(500 / 3)


def test_stop_rule_reads_the_window_when_set_and_the_iteration_otherwise():
    windowed = config_from_dict({"algo": "PPO", "environment": {"env": "CartPole-v1"}},
                                ["stop.episode_return_mean=100", "stop.episode_return_window=100"]).stop_cfg
    plain = config_from_dict({"algo": "PPO", "environment": {"env": "CartPole-v1"}}, ["stop.episode_return_mean=100"]).stop_cfg
    lucky = {"episode_return_mean": 150.0, "episode_return_window_mean": 60.0, "env_steps_total": 10, "time_total_s": 1.0,
             "iteration": 1}
    assert stop_reason(windowed, lucky) is None  # one good iteration does not lift a 100-episode mean
    assert stop_reason(plain, lucky) == "episode_return_mean 150.00 >= 100.0"
    assert stop_reason(windowed, {**lucky, "episode_return_window_mean": 101.0}) == (
        "episode_return_mean (last 100 episodes) 101.00 >= 100.0")
    assert "episode_return_window_mean" not in _iteration(_builder(window=0), [5.0])
