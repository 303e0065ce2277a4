"""The progress line shows per-policy returns where the summed return says nothing (zero-sum games)."""

from marl.config.sections import StopSection
from marl.logging.progress import progress_line, zero_sum_returns


def result(**extra):
    return {"iteration": 3, "env_steps_total": 3072, "time_total_s": 12.0, **extra}


def test_zero_sum_self_play_shows_each_policy():
    r = result(**{"episode_return_mean": 0.0, "policy_return_mean/main": 0.42, "policy_return_mean/main_v1": -0.5,
                  "policy_return_mean/main_v2": 0.1})
    line = progress_line(r, StopSection())
    assert "return     0.0 (main_v1 -0.50 | main +0.42 | main_v2 +0.10)" in line


def test_cooperative_returns_keep_the_sum_only():
    r = result(**{"episode_return_mean": -60.0, "policy_return_mean/a": -30.0, "policy_return_mean/b": -30.0})
    assert zero_sum_returns(r) == ""
    assert "(" not in progress_line(r, StopSection()).split("stop:")[0]


def test_one_policy_or_all_zero_shows_nothing():
    assert zero_sum_returns(result(**{"episode_return_mean": 0.0, "policy_return_mean/main": 0.0})) == ""
    assert zero_sum_returns(result(**{"episode_return_mean": 0.0, "policy_return_mean/a": 0.0, "policy_return_mean/b": 0.0})) == ""
