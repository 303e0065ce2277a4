"""PPO end to end: results, per-policy training, learning thresholds (slow), Ray runners."""

from __future__ import annotations

import math

import numpy as np
import pytest

import marl
from marl.data import sample_batch as sb
from tests.actor_kill import kill_and_wait

RANDOM_SIMPLE_SPREAD = -79.0  # a uniform random policy's episode return, summed over the 3 agents (measured)


def tag_config(policies_to_train=None):
    return (
        marl.load_scenario("scenarios/simple_tag_ppo.yaml")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=50)
        .training(train_batch_size=400, minibatch_size=50, num_epochs=2)  # agent steps: 100 env steps x 4 agents
        .multi_agent(policies_to_train=policies_to_train or ["predator", "prey"])
    )


def weights_of(algo):
    return algo.get_weights()["modules"]


def changed(before, after, pid):
    return any(not np.array_equal(before[pid][k], after[pid][k]) for k in before[pid])


def test_result_has_the_documented_keys():
    algo = tag_config().build()
    try:
        r = algo.train()
    finally:
        algo.stop()
    for key in ("iteration", "env_steps_total", "agent_steps_total", "episode_return_mean", "time_total_s", "env_steps_per_s"):
        assert key in r, key
    assert r["iteration"] == 1 and r["env_steps_total"] == 100 and r["agent_steps_total"] == 400
    assert r["counters/agent_steps_sampled/predator"] == 300 and r["counters/agent_steps_sampled/prey"] == 100
    for pid in ("predator", "prey"):
        assert f"policy_return_mean/{pid}" in r
        for loss in ("policy_loss", "vf_loss", "entropy", "approx_kl", "clip_fraction"):
            assert math.isfinite(r[f"losses/{pid}/{loss}"]), (pid, loss)
    # each policy trained on exactly its own agents' rows
    assert r["losses/predator/agent_steps_trained"] == 300
    assert r["losses/prey/agent_steps_trained"] == 100
    assert r["perf/policy_lag_max"] == 0  # synchronous sampling: data from the current weights


def test_both_policies_change_when_both_are_trained():
    algo = tag_config().build()
    try:
        before = weights_of(algo)
        algo.train()
        after = weights_of(algo)
    finally:
        algo.stop()
    assert changed(before, after, "predator") and changed(before, after, "prey")


def test_policy_left_out_of_policies_to_train_stays_bit_identical():
    algo = tag_config(["predator"]).build()
    try:
        before = weights_of(algo)
        for _ in range(2):
            r = algo.train()
        after = weights_of(algo)
        runner_prey = algo.runners.local.module.get_state(["prey"])
    finally:
        algo.stop()
    assert changed(before, after, "predator")
    for key in before["prey"]:
        np.testing.assert_array_equal(before["prey"][key], after["prey"][key])
        np.testing.assert_array_equal(before["prey"][key], runner_prey["prey"][key])
    assert "losses/prey/policy_loss" not in r


def test_runners_act_with_the_learners_weights():
    algo = tag_config().build()
    try:
        algo.train()
        learner = algo.get_weights()
        runner = algo.runners.local
        assert runner.weights_version == learner["version"]
        for pid in ("predator", "prey"):
            state = runner.module.get_state([pid])[pid]
            for key, value in learner["modules"][pid].items():
                np.testing.assert_array_equal(value, state[key])
    finally:
        algo.stop()


def test_observation_filter_state_syncs_from_learner():
    config = (
        marl.PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32, observation_filter="mean_std")
        .training(train_batch_size=64, num_epochs=1)
    )
    algo = config.build()
    try:
        algo.train()
        algo.train()
        learner_state = algo.get_weights()["connectors"]["default_policy"]["mean_std"]
        runner_state = algo.runners.local.connectors["default_policy"].get_central()["mean_std"]
        assert learner_state["count"] == 128.0  # every observation the runner normalised, merged once
        np.testing.assert_allclose(learner_state["mean"], runner_state["mean"])
        batch = algo.runners.local.sample()["default_policy"]
        assert abs(float(batch[sb.OBS].mean())) < 1.0  # normalised, not raw
    finally:
        algo.stop()


def test_save_and_restore_weights(tmp_path):
    algo = tag_config().build()
    try:
        algo.train()
        path = algo.save(tmp_path / "ckpt")
        saved = weights_of(algo)
        algo.train()
        algo.restore(path)
        restored = weights_of(algo)
        assert algo.iteration == 1
    finally:
        algo.stop()
    for pid in saved:
        for key in saved[pid]:
            np.testing.assert_array_equal(saved[pid][key], restored[pid][key])


def train_until(algo, threshold, max_env_steps, window=1):
    history = []
    while True:
        r = algo.train()
        if not math.isnan(r["episode_return_mean"]):
            history.append(r["episode_return_mean"])
        smoothed = float(np.mean(history[-window:])) if history else -math.inf
        if smoothed >= threshold or r["env_steps_total"] >= max_env_steps:
            return smoothed, r


@pytest.mark.slow
def test_ppo_cartpole_in_process_reaches_450():
    algo = marl.load_scenario("scenarios/cartpole_ppo.yaml").build()
    try:
        score, r = train_until(algo, 450, 100_000)
    finally:
        algo.stop()
    assert score >= 450, f"mean return {score:.1f} after {r['env_steps_total']} env steps"


@pytest.mark.slow
def test_ppo_cartpole_learns_on_two_ray_runners(ray_session):
    """The scenario on two Ray runners improves from random (~22) to >= 100 within 6 iterations (12k env steps);
    reaching 450 is the in-process test's claim (the learner is the same).

    Measured (2026-11-29, 2 cores shared): seeds 0-2 at 154 / 136 / 136 after 6 iterations (93 / 122 / 91 after
    5). The mutant is a runner group that never sends the actors new weights (they act with the initial policy):
    its returns stayed at 21-25 over the 6 iterations (20.8 last), and the versions check fails too."""
    config = marl.load_scenario(
        "scenarios/cartpole_ppo.yaml", ["env_runners.num_env_runners=2", "env_runners.num_envs_per_env_runner=4"]
    )
    algo = config.build()
    try:
        assert len(algo.runners.remote) == 2
        results = [algo.train() for _ in range(6)]
        versions = ray_session.get([a.get_weights_version.remote() for a in algo.runners.remote])
        learner_version = algo.get_weights()["version"]
    finally:
        algo.stop()
    returns = [r["episode_return_mean"] for r in results]
    assert results[-1]["env_steps_total"] == 6 * 2048
    assert returns[-1] >= 100, returns
    assert versions == [learner_version] * 2


@pytest.mark.slow
def test_ppo_simple_spread_shared_policy_beats_random_by_15():
    """The README's default scenario learns: 5 iterations of 2048 env steps (a window of ~400 episodes, so noise
    cannot carry it) at random + 15 within 100k env steps.

    Measured (benchmarks/studies/spread_gamma.py; the MPE family's gamma 0.95): seeds 0-2 first there at 39k / 41k / 43k
    env steps, never below random on the way. The mutant is the family's former gamma 0.99: it dipped to -122 and
    was first there at ~223k (seed 0); lr 0 stays at random."""
    algo = marl.load_scenario("scenarios/simple_spread_ppo.yaml").build()
    try:
        score, r = train_until(algo, RANDOM_SIMPLE_SPREAD + 15, 100_000, window=5)
    finally:
        algo.stop()
    assert score >= RANDOM_SIMPLE_SPREAD + 15, f"return {score:.1f} after {r['env_steps_total']} env steps"


def test_remote_learner_and_runners_on_ray_and_a_killed_runner_is_restarted_with_current_weights(ray_session):
    """One build (a learner actor, two runner actors) for both claims: the Ray path trains, and a runner killed
    between iterations is recreated, synced and asked again."""
    config = tag_config().env_runners(num_env_runners=2).learners(num_learners=1)
    algo = config.build()
    try:
        before = weights_of(algo)
        r = algo.train()
        after = weights_of(algo)
        # Two runners share the 400-agent-step batch: fragments of 25 steps x 2 env copies x 4 agents each.
        assert r["env_steps_total"] == 100 and r["agent_steps_total"] == 400
        assert changed(before, after, "predator")
        versions = ray_session.get([a.get_weights_version.remote() for a in algo.runners.remote])
        assert versions == [algo.get_weights()["version"]] * 2
        assert r["fault/runner_restarts"] == 0

        kill_and_wait(ray_session, algo.runners.remote[0])
        r = algo.train()  # the dead runner's sample fails, it is recreated, synced and asked again
        assert r["fault/runner_restarts"] == 1
        assert r["env_steps_total"] == 200 and r["perf/policy_lag_max"] == 0
        versions = ray_session.get([a.get_weights_version.remote() for a in algo.runners.remote])
        assert versions == [algo.get_weights()["version"]] * 2
    finally:
        algo.stop()
