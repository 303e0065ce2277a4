"""Resource requests are checked before Ray is asked: a request no node can place fails in seconds."""

from __future__ import annotations

import pytest

from marl.runtime import resources
from marl.algorithms.ppo.config import PPOConfig
from marl.errors import ConfigError

from tests.fake_clock import FakeClock


def config(**runners):
    return PPOConfig().environment("CartPole-v1").env_runners(**runners)


def test_the_request_adds_runners_evaluation_runners_and_learners():
    cfg = config(num_env_runners=3, num_cpus_per_env_runner=0.5).evaluation(evaluation_num_env_runners=2)
    cfg.learners(num_learners=2, num_cpus_per_learner=1.0)
    asked, parts = resources.requested_cpus(cfg)
    assert asked == pytest.approx(3 * 0.5 + 2 * 0.5 + 2)
    assert parts == ["3 env runners x 0.5 CPU", "2 evaluation runners x 0.5 CPU", "2 learners x 1 CPU"]


def test_a_local_machine_short_of_cpus_fails_at_once(monkeypatch):
    monkeypatch.setattr(resources, "local_cpus", lambda: 2)
    with pytest.raises(ConfigError, match=r"asks Ray for 64 CPUs \(64 env runners x 1 CPU\) but this machine has 2"):
        resources.check_local_request(config(num_env_runners=64))
    resources.check_local_request(config(num_env_runners=4, num_cpus_per_env_runner=0.5))  # fractional CPUs fit


def test_a_running_ray_short_of_cpus_fails_at_once(ray_session, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    clock = FakeClock()
    monkeypatch.setattr(resources, "time", clock)
    with pytest.raises(ConfigError, match=r"asks Ray for 64 CPUs .* but the cluster has 4;"):
        resources.check_cluster_request(config(num_env_runners=64))
    assert clock.sleeps == []  # a local Ray cannot grow: no waiting at all


def test_a_joined_cluster_gets_a_bounded_wait_with_a_message(ray_session, monkeypatch, capsys):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # only read to tell a joined cluster from a local Ray
    clock = FakeClock()
    monkeypatch.setattr(resources, "time", clock)
    with pytest.raises(ConfigError, match=r"but the cluster has 4 after waiting 1 s \(env_runners.resource_wait_s\)"):
        resources.check_cluster_request(config(num_env_runners=64, resource_wait_s=1.0), poll_s=0.2)
    assert clock.sleeps == pytest.approx([0.2] * 5) and clock.now == pytest.approx(1.0)  # polled every 0.2 s for 1 s
    assert "waiting up to 1 s for the cluster to provide 64 CPUs (it has 4)" in capsys.readouterr().out


def test_a_request_that_fits_passes(ray_session):
    resources.check_cluster_request(config(num_env_runners=2))
