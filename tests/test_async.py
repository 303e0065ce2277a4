"""Asynchronous sampling: V-trace, bounded policy lag, source-scoped weight syncs, APPO and IMPALA."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest

from marl import APPOConfig, IMPALAConfig
from marl.connectors import vtrace


def _vtrace_by_definition(mu_logp, pi_logp, r, v, boot, term, end, gamma, rho_bar, c_bar, pg_rho_bar, lambda_=1.0):
    """The paper's formula term by term: vs_s = V(x_s) + sum_t gamma^(t-s) (prod_{i<t} c_i) rho_t delta_t."""
    n = len(r)
    ratio = np.exp(pi_logp - mu_logp)
    rho, c = np.minimum(rho_bar, ratio), lambda_ * np.minimum(c_bar, ratio)
    next_v = np.array([0.0 if term[t] else (boot[t] if end[t] else v[t + 1]) for t in range(n)])
    delta = rho * (r + gamma * next_v - v)
    vs = np.zeros(n)
    for s in range(n):
        total, coef, t = 0.0, 1.0, s
        while True:
            total += coef * delta[t]
            if end[t] or term[t]:
                break
            coef *= gamma * c[t]
            t += 1
        vs[s] = v[s] + total
    next_vs = np.array([0.0 if term[t] else (boot[t] if end[t] else vs[t + 1]) for t in range(n)])
    adv = np.minimum(pg_rho_bar, ratio) * (r + gamma * next_vs - v)
    return vs, adv


def test_vtrace_matches_its_definition_off_policy():
    rng = np.random.default_rng(0)
    n = 12
    mu, pi = rng.normal(-1, 0.5, n), rng.normal(-1, 0.5, n)
    r, v, boot = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
    term = np.zeros(n, bool)
    term[4] = True
    end = np.zeros(n, bool)
    end[[4, 8, 11]] = True  # pieces: 0-4 (terminated), 5-8 (truncated), 9-11 (cut)
    for lambda_ in (1.0, 0.7):  # (lambda scales the traces c, as in RLlib's and the paper's remark)
        got = vtrace(mu, pi, r, v, boot, term, end, 0.9, rho_bar=1.0, c_bar=0.8, pg_rho_bar=1.2, lambda_=lambda_)
        want = _vtrace_by_definition(mu, pi, r, v, boot, term, end, 0.9, 1.0, 0.8, 1.2, lambda_)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5)


def test_vtrace_on_policy_is_the_n_step_return():
    r = np.array([1.0, 2.0, 3.0], np.float32)
    v = np.array([0.5, 0.1, -0.2], np.float32)
    logp = np.zeros(3, np.float32)
    vs, adv = vtrace(logp, logp, r, v, np.array([0, 0, 4.0], np.float32), np.zeros(3), np.array([0, 0, 1]), 0.5)
    np.testing.assert_allclose(vs, [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 4, 2 + 0.5 * 3 + 0.25 * 4, 3 + 0.5 * 4], rtol=1e-6)
    np.testing.assert_allclose(adv, r + 0.5 * np.append(vs[1:], 4.0) - v, rtol=1e-6)


def test_impala_in_process_runs_and_reports():
    algo = (
        IMPALAConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=25)
        .training(train_batch_size=200, min_env_steps_per_iteration=400)
        .debugging(seed=0)
        .build()
    )
    try:
        result = algo.train()
        assert result["env_steps_this_iter"] >= 400
        assert result["counters/learner_updates"] == 2
        for key in ("policy_loss", "vf_loss", "entropy"):
            assert np.isfinite(result[f"losses/default_policy/{key}"])
        assert result["perf/policy_lag_max"] == 0  # in-process: sampled with the newest weights
        g = algo.workflow.graph
        assert g.nodes["sample"]["params"]["mode"] == "async"
        assert g.nodes["sync_weights"]["params"]["scope"] == "source"
    finally:
        algo.stop()


class _StallingCartPole(gym.Wrapper):
    """CartPole whose steps now and then stall, so runners fall out of step with each other."""

    def __init__(self, config=None):
        super().__init__(gym.make("CartPole-v1"))
        self.rng = np.random.default_rng()

    def step(self, action):
        if self.rng.random() < 0.01:
            time.sleep(0.03)
        return self.env.step(action)


def test_policy_lag_never_exceeds_the_bound_with_stalling_runners(ray_session):
    import sys

    from ray import cloudpickle

    from marl import register_env

    # Runner processes cannot import this test module: ship the env class by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    register_env("StallingCartPole", lambda cfg: _StallingCartPole(cfg))
    bound = 2
    algo = (
        APPOConfig()
        .environment("StallingCartPole")
        .env_runners(num_env_runners=2, num_envs_per_env_runner=2, rollout_fragment_length=10)
        .training(train_batch_size=20, max_requests_in_flight_per_env_runner=1, max_policy_lag=bound,
                  min_env_steps_per_iteration=400)
        .build()
    )
    try:
        lags = []
        while len(lags) < 40 and (len(lags) < 6 or max(lags) < 1):  # until both runners' data trained
            result = algo.train()
            lags.append(result["perf/policy_lag_max"])
        assert max(lags) <= bound
        assert max(lags) >= 1  # the runs really were asynchronous
        # every runner got weights only after its own data trained (scope=source), at versions that advance
        assert all(v > 1 for v in algo.runners.versions)
        assert_scope_source_sends_only_to_the_producer(algo)
    finally:
        algo.stop()


def test_a_lag_bound_below_the_requests_in_flight_is_rejected():
    from marl import ConfigError

    cfg = APPOConfig().environment("CartPole-v1").env_runners(num_env_runners=2).training(
        max_requests_in_flight_per_env_runner=2, max_policy_lag=3
    )
    with pytest.raises(ConfigError, match=r"max_policy_lag.*4 sample requests in flight"):
        cfg.validate()


def assert_scope_source_sends_only_to_the_producer(algo):
    """SyncWeights(scope=source) after an update on runner 2's batch: runner 2 gets the new weights, runner 1 not.
    (Checked on the stalling-runner test's algorithm: one set of runner actors for both.)"""
    import ray

    from marl.workflow import LearnResults, SyncWeights
    from marl.workflow.operators import ExecutionContext
    from marl.execution import LocalIterator, SharedMetrics

    start = list(algo.runners.versions)
    first_runner_version = ray.get(algo.runners.remote[0].get_weights_version.remote())
    batch = algo.runners.call_all("sample")[1]  # produced by runner 2
    stats = algo.learners.update(batch.batch, batch.connector_deltas)
    metrics = SharedMetrics()
    ctx = ExecutionContext(algo.config, algo.runners, algo.learners, metrics)
    items = LocalIterator(lambda: iter([LearnResults.from_update(stats, batch)]), metrics)
    next(SyncWeights(scope="source").build(ctx, [items]))
    assert algo.runners.versions[0] == start[0]
    assert algo.runners.versions[1] == algo.learners.version > start[1]
    assert ray.get(algo.runners.remote[1].get_weights_version.remote()) == algo.learners.version
    assert ray.get(algo.runners.remote[0].get_weights_version.remote()) == first_runner_version < algo.learners.version


@pytest.mark.parametrize("use_kl_loss", [False, True])
def test_appo_ratio_is_centred_on_the_target_policy(use_kl_loss):
    """r = pi / max(pi_old, mu / 2): pi / pi_old unless the behaviour policy mu was > 2x as likely as pi_old."""
    import torch

    from marl.algorithms.appo.loss import appo_loss
    from marl.data import sample_batch as sb
    from marl.modules.mlp import ActorCriticMLP

    obs_space, act_space = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4)
    torch.manual_seed(0)
    module, target = ActorCriticMLP(obs_space, act_space), ActorCriticMLP(obs_space, act_space)
    with torch.no_grad():
        for p in target.pi.parameters():
            p.add_(0.3 * torch.randn_like(p))  # pi_old: an older, different policy
    n = 64
    obs, actions = torch.randn(n, 3), torch.randint(0, 4, (n,))
    with torch.no_grad():
        target_logp = target.action_dist(target.forward_train({"obs": obs})["action_dist_inputs"]).logp(actions)
    behaviour_logp = target_logp + torch.linspace(-2.0, 2.0, n)  # mu / pi_old from e^-2 to e^2: both sides of 2
    batch = {sb.OBS: obs, sb.ACTIONS: actions, sb.ACTION_LOGP: behaviour_logp,
             sb.ADVANTAGES: torch.randn(n), sb.VALUE_TARGETS: torch.randn(n)}
    cfg = APPOConfig().training(clip_param=0.2, use_kl_loss=use_kl_loss, kl_coeff=0.5, entropy_coeff=0.0).training_cfg
    _, stats = appo_loss(module, batch, cfg, target=target)

    out = module.forward_train({"obs": obs})
    dist = module.action_dist(out["action_dist_inputs"])
    logp = dist.logp(actions)
    ratio = torch.exp(logp - behaviour_logp) * torch.clamp(torch.exp(behaviour_logp - target_logp), 0, 2)
    adv = batch[sb.ADVANTAGES]
    expected = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    target_dist = target.action_dist(target.forward_train({"obs": obs})["action_dist_inputs"])
    kl = (target_dist.log_probs.exp() * (target_dist.log_probs - dist.log_probs)).sum(-1).mean()
    if use_kl_loss:
        expected = expected + 0.5 * kl
    assert stats["policy_loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert stats["mean_kl_loss"].item() == pytest.approx(kl.item(), rel=1e-5)
    # the cap binds on some rows (mu > 2 pi_old) and not on others: both branches were exercised
    assert (behaviour_logp - target_logp > np.log(2)).any() and (behaviour_logp - target_logp < np.log(2)).any()


def test_appo_refreshes_its_target_policy_in_the_graph_and_impala_has_none():
    appo = APPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=25).training(
        train_batch_size=50, target_network_update_freq=100, min_env_steps_per_iteration=400)
    algo = appo.build()
    try:
        g = algo.workflow.graph
        assert list(g.successors("learn")) == ["update_target"] and list(g.successors("update_target")) == ["sync_weights"]
        initial = algo.learners.get_target_state()["default_policy"]["target"]
        result = algo.train()
        assert result["counters/target_updates"] >= 3  # 400+ env steps, a refresh every 100
        refreshed = algo.learners.get_target_state()["default_policy"]["target"]
        assert any(not np.array_equal(initial[k], refreshed[k]) for k in initial)
    finally:
        algo.stop()
    assert "update_target" not in IMPALAConfig().environment("CartPole-v1").default_workflow().graph
    no_target = appo.copy().training(target_network_update_freq=None)
    assert "update_target" not in no_target.default_workflow().graph
    assert not no_target.algorithm_parts().uses_target_network  # the ratio is against the behaviour policy


def test_appo_kl_loss_without_a_target_policy_is_rejected():
    from marl import ConfigError

    cfg = APPOConfig().environment("CartPole-v1").training(use_kl_loss=True, target_network_update_freq=None)
    with pytest.raises(ConfigError, match=r"use_kl_loss.*target_network_update_freq"):
        cfg.validate()


@pytest.mark.slow
def test_appo_cartpole_learns_with_two_ray_runners_within_the_lag_bound(ray_session):
    """The scenario on its two asynchronous Ray runners: best return >= 120 within 40k env steps (20 iterations),
    the policy lag never past the in-flight bound. Reaching 450 and holding it is the in-process test's claim.

    Measured (2026-11-29, 2 cores shared with other runs): seeds 0-2 best 218 / 172 / 209 by 24k env steps,
    first >= 120 at 22k / 22k / 20k; at 2k env steps 23 / 22 / 21. The mutant is a runner group that never
    sends the actors new weights (they act with the initial policy): best 24.9 in 24k env steps. A fresh-clone suite
    run (2026-11-29) reached only 99.8 by 24k (the runners' batches depend on timing): the budget is 40k, about twice
    the steps the seeds first reached 120 at; the run stops there, so a passing run costs the same."""
    from marl import load_scenario

    algo = load_scenario("scenarios/cartpole_appo.yaml").build()
    bound = algo.config.policy_lag_bound()
    try:
        best, lag_max = -np.inf, 0
        while True:
            result = algo.train()
            best = max(best, result["episode_return_mean"])
            lag_max = max(lag_max, result.get("perf/policy_lag_max", 0))
            if best >= 120 or result["env_steps_total"] >= 40_000:
                break
        assert best >= 120, f"APPO reached only {best:.1f} in {result['env_steps_total']} env steps"
        assert lag_max <= bound, f"policy lag {lag_max} exceeded the in-flight bound {bound}"
    finally:
        algo.stop()


@pytest.mark.slow
def test_appo_cartpole_scenario_holds_its_return_once_reached():
    """In-process, the scenario reaches 450, then stays >= 400 in at least 16 of the next 20 iterations,
    and while it climbs its value function explains a good part of its V-trace targets. Without PopArt
    (training.popart=false) or the reward scale the scenario used before, the value function stays far
    below CartPole's discounted returns (~100), its targets vary with the row's place in its fragment
    (explained variance 0.02 here), the advantages are that noise, and after 450 (at 72k) 6 of 20
    iterations were >= 400 (PopArt: 46k, 75 of the next 77; training.lr=0: 23 at 150k)."""
    from marl import load_scenario

    algo = load_scenario("scenarios/cartpole_appo.yaml", ["env_runners.num_env_runners=0"]).build()
    try:
        climb = []  # the value function's explained variance of its targets, per iteration before 450
        result = algo.train()
        while (result["episode_return_mean"] or 0.0) < 450 and result["env_steps_total"] < 150_000:
            climb.append(result["losses/default_policy/vf_explained_var"])
            result = algo.train()
        assert (result["episode_return_mean"] or 0.0) >= 450, f"APPO reached no 450 in {result['env_steps_total']} env steps"
        returns = [algo.train()["episode_return_mean"] or 0.0 for _ in range(20)]  # (None: no episode ended)
        assert sum(r >= 400 for r in returns) >= 16, f"returns after the first 450: {returns}"
        # (from the 6th iteration on; at 500 the targets are all ~the same and the ratio says little)
        explained = np.mean(climb[5:])
        assert explained > 0.2, f"while climbing the value function explained {explained:.2f} of its targets' variance"
    finally:
        algo.stop()


@pytest.mark.slow
def test_impala_cartpole_learns_in_process():
    algo = (
        IMPALAConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=8, rollout_fragment_length=50)
        .debugging(seed=0)
        .build()
    )
    try:
        best = -np.inf
        while True:
            result = algo.train()
            best = max(best, result["episode_return_mean"])
            if best >= 300 or result["env_steps_total"] >= 150_000:
                break
        assert best >= 300, f"IMPALA reached only {best:.1f} in {result['env_steps_total']} env steps"
    finally:
        algo.stop()
