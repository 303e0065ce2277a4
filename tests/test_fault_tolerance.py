"""Runner failures: a killed runner process or an env that raises is replaced, re-synced, and the run goes on."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import gymnasium as gym
import pytest
import ray.cloudpickle

import marl
from marl.runners import RunnerFailedError

ray.cloudpickle.register_pickle_by_value(__import__(__name__))  # runner actors cannot import this test module


def tag_config(**runners):
    return (
        marl.load_scenario("scenarios/simple_tag_ppo.yaml")
        .env_runners(**({"num_envs_per_env_runner": 2, "rollout_fragment_length": 50} | runners))
        .training(train_batch_size=400, minibatch_size=50, num_epochs=1)  # agent steps: 100 env steps x 4 agents
        .debugging(seed=0)
    )


def test_sigkilled_runner_is_replaced_and_the_run_completes(ray_session):
    algo = tag_config(num_env_runners=2).build()
    killed = []
    try:
        results = []
        for i in range(6):
            if i == 3:
                pid = ray_session.get(algo.runners.remote[0].getpid.remote())
                # SIGKILL the runner's process while this iteration samples
                timer = threading.Timer(0.05, lambda: (os.kill(pid, signal.SIGKILL), killed.append(pid)))
                timer.start()
            results.append(algo.train())
            if i == 3:
                timer.join()
        new_pid = ray_session.get(algo.runners.remote[0].getpid.remote())
        versions = ray_session.get([a.get_weights_version.remote() for a in algo.runners.remote])
        learner_version = algo.get_weights()["version"]
    finally:
        algo.stop()
    assert killed and new_pid != killed[0]
    assert [r["iteration"] for r in results] == list(range(1, 7))
    assert results[-1]["fault/runner_restarts"] == 1
    assert results[2]["fault/runner_restarts"] == 0
    # Both runners' fragments in every iteration, the replacement's included (the two share the
    # 400-agent-step batch: 25 env steps x 2 env copies each) ...
    assert [r["env_steps_this_iter"] for r in results] == [100] * 6
    # ... and every fragment was sampled with the learner's current weights: a replacement that sampled
    # before receiving them would carry weights version 0 and show up as policy lag.
    assert all(r["perf/policy_lag_max"] == 0 for r in results)
    assert versions == [learner_version] * 2


class FlakyCartPole(gym.Wrapper):
    """CartPole that raises at its `at_step`-th step: once overall (the process that creates the flag file) or always."""

    def __init__(self, flag_file: str, always: bool = False, at_step: int = 10):
        super().__init__(gym.make("CartPole-v1"))
        self.flag, self.always, self.at_step, self.steps = flag_file, always, at_step, 0

    def _first(self) -> bool:
        try:
            os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL))  # atomic: one process wins, even across runners
            return True
        except FileExistsError:
            return False

    def step(self, action):
        self.steps += 1
        if self.steps == self.at_step and (self._first() or self.always):
            raise RuntimeError("simulator lost its license")
        return self.env.step(action)


marl.register_env("flaky_cartpole", lambda cfg: FlakyCartPole(**cfg))


def flaky_config(tmp_path, **kw):
    return (
        marl.PPOConfig()
        .environment("flaky_cartpole", env_config={"flag_file": str(tmp_path / "raised"), **kw.pop("env", {})})
        .env_runners(**({"num_envs_per_env_runner": 2, "rollout_fragment_length": 32} | kw))
        .training(train_batch_size=64, num_epochs=1)
        .debugging(seed=0)
    )


def test_runner_whose_env_raises_is_rebuilt_and_the_iteration_goes_on(tmp_path, caplog):
    algo = flaky_config(tmp_path).build()
    try:
        with caplog.at_level("WARNING", logger="marl"):
            results = [algo.train() for _ in range(3)]
    finally:
        algo.stop()
    assert (tmp_path / "raised").exists()
    assert results[-1]["fault/runner_restarts"] == 1
    assert [r["env_steps_total"] for r in results] == [64, 128, 192]
    assert all(r["perf/policy_lag_max"] == 0 for r in results)
    warning = next(r.getMessage() for r in caplog.records if "restarting it" in r.getMessage())
    assert "flaky_cartpole" in warning and "agent_0" in warning and "episode step 9" in warning
    assert "RuntimeError: simulator lost its license" in warning


def test_a_replacement_runner_goes_on_from_the_failed_runners_step_count(tmp_path):
    """Exploration schedules run on each runner's env steps: a replacement must not start them over (epsilon 1)."""
    algo = flaky_config(tmp_path, env={"at_step": 150}).build()
    try:
        results = [algo.train() for _ in range(6)]
        states = algo.runners.get_states()
    finally:
        algo.stop()
    assert results[-1]["fault/runner_restarts"] == 1
    # every delivered fragment is counted by the runner slot that produced it, the replacement's included
    assert sum(state["steps_sampled"] for state in states) == results[-1]["env_steps_total"]


def test_a_ray_runner_whose_env_raises_is_rebuilt_goes_on_from_its_step_count_and_the_iteration_goes_on(
        tmp_path, ray_session, caplog):
    """The two tests above on a Ray runner actor, in one run (one actor and its replacement): the env raises at
    its 40th step, in the second iteration, after the runner has delivered a fragment."""
    algo = flaky_config(tmp_path, num_env_runners=1, env={"at_step": 40}).build()
    try:
        with caplog.at_level("WARNING", logger="marl"):
            results = [algo.train() for _ in range(3)]
        states = algo.runners.get_states()
    finally:
        algo.stop()
    assert (tmp_path / "raised").exists()
    assert [r["fault/runner_restarts"] for r in results] == [0, 1, 1]
    assert [r["env_steps_total"] for r in results] == [64, 128, 192]
    assert all(r["perf/policy_lag_max"] == 0 for r in results)
    warning = next(r.getMessage() for r in caplog.records if "restarting it" in r.getMessage())
    assert "flaky_cartpole" in warning and "agent_0" in warning and "episode step" in warning
    assert "RuntimeError: simulator lost its license" in warning
    # the replacement counts on from the failed runner's delivered steps, not from 0
    assert sum(state["steps_sampled"] for state in states) == results[-1]["env_steps_total"]


def test_past_the_restart_limit_the_run_stops_with_a_clear_error(tmp_path):
    algo = flaky_config(tmp_path, env={"always": True}, max_runner_restarts=2).build()
    try:
        with pytest.raises(RunnerFailedError) as info:
            algo.train()
    finally:
        algo.stop()
    message = str(info.value)
    assert "3 runner failures exceed env_runners.max_runner_restarts=2" in message
    assert "env 'flaky_cartpole'" in message and "agents ['agent_0']" in message and "episode step 9" in message
    assert "RuntimeError: simulator lost its license" in message
    assert isinstance(info.value.__cause__.__cause__, RuntimeError)  # the original error stays attached


def test_env_output_errors_are_not_retried(tmp_path):
    """A contract violation is a bug in the env: restarting would only repeat it."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    config = (
        marl.PPOConfig()
        .environment("tests.bad_envs", env_config={"fault": "unknown_reward"})
        .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=8)
        .training(train_batch_size=8, num_epochs=1)
        .debugging(validate_env=True)
    )
    algo = config.build()
    try:
        with pytest.raises(marl.envs.EnvOutputError, match="unknown agent 'ghost'"):
            algo.train()
        assert algo.runners.restarts == 0
    finally:
        algo.stop()


def test_replacement_runner_gets_weights_and_filter_state_before_it_samples(tmp_path, monkeypatch):
    from marl.runners import EnvRunner

    events = []
    original_set, original_sample = EnvRunner.set_weights, EnvRunner.sample

    def set_weights(self, weights):
        filt = weights["connectors"]["default_policy"]["mean_std"]
        events.append((self.incarnation, "set_weights", weights["version"], filt["count"]))
        return original_set(self, weights)

    def sample(self, *args):
        events.append((self.incarnation, "sample", self.weights_version, self.connectors["default_policy"].get_central()["mean_std"]["count"]))
        return original_sample(self, *args)

    monkeypatch.setattr(EnvRunner, "set_weights", set_weights)
    monkeypatch.setattr(EnvRunner, "sample", sample)
    # The env raises at its 40th step: in the second iteration, after the learner has filter statistics.
    algo = flaky_config(tmp_path, env={"at_step": 40}, observation_filter="mean_std").build()
    try:
        first = algo.train()
        learner_after_first = algo.get_weights()
        second = algo.train()
    finally:
        algo.stop()
    assert first["fault/runner_restarts"] == 0 and second["fault/runner_restarts"] == 1
    replacement = [e for e in events if e[0] == 1]
    assert replacement[0] == (1, "set_weights", learner_after_first["version"], 64.0)
    assert replacement[1] == (1, "sample", learner_after_first["version"], 64.0)
    assert second["perf/policy_lag_max"] == 0
