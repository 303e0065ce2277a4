"""Continuous CQL(H) on SAC's learner: the regulariser checked by hand, and the loss is SAC's critic loss plus it."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.algorithms.cql.config import CQLTraining
from marl.algorithms.cql.continuous import ContinuousCQLParts, cql_critic_loss, soft_max_gap
from marl.algorithms.cql.loss import prepare_transitions
from marl.algorithms.sac.loss import critic_loss, policy_sample
from marl.data import sample_batch as sb
from marl.modules.actor_q import ActorQModule


def test_soft_max_gap_by_hand():
    # two states, K = 3 sampled actions each with their log-densities, T = 1 and T = 0.5
    q = torch.tensor([[1.0, 2.0, 0.0], [-1.0, 0.5, 3.0]])
    logp = torch.tensor([[-0.7, -0.7, -1.2], [0.1, -0.3, -2.0]])
    q_data = torch.tensor([1.5, 0.0])
    for t in (1.0, 0.5):
        by_hand = []
        for i in range(2):
            s = sum(math.exp(q[i, k].item() / t - logp[i, k].item()) for k in range(3))
            by_hand.append(t * (math.log(s) - math.log(3)) - q_data[i].item())
        assert soft_max_gap(q, logp, q_data, t).item() == pytest.approx(sum(by_hand) / 2, rel=1e-6)


def test_soft_max_gap_estimates_log_integral_of_exp_q_over_the_box():
    # Q(a) = 2a on [-1, 1]: log of the integral of exp(2a) is log(sinh 2); uniform samples have log p = -log 2
    a = torch.rand(1, 200_000, generator=torch.Generator().manual_seed(0)) * 2 - 1
    gap = soft_max_gap(2 * a, torch.full_like(a, -math.log(2.0)), torch.zeros(1), 1.0)
    assert gap.item() == pytest.approx(math.log(math.sinh(2.0)), abs=0.01)


def transitions(n=8, obs_dim=3, act_dim=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        sb.OBS: torch.randn(n, obs_dim, generator=g), sb.NEXT_OBS: torch.randn(n, obs_dim, generator=g),
        sb.ACTIONS: torch.rand(n, act_dim, generator=g) * 2 - 1, sb.REWARDS: torch.randn(n, generator=g),
        sb.TERMINATEDS: torch.tensor([False] * (n - 1) + [True]),
    }


def test_critic_loss_is_sacs_plus_alpha_times_the_penalty_over_uniform_and_policy_actions():
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    module = ActorQModule(space, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), {"hiddens": [16]})
    targets = {"critic": ActorQModule(space, module.action_space, {"hiddens": [16]}).critics}
    cfg = CQLTraining(cql_alpha=2.5, cql_num_actions=4, cql_temperature=1.0, gamma=0.9)
    batch = prepare_transitions(module, transitions(), cfg)
    torch.manual_seed(1)
    loss, stats = cql_critic_loss(module, batch, cfg, targets)

    torch.manual_seed(1)  # the same draws, in the same order, by hand
    td, _ = critic_loss(module, batch, cfg, targets)
    obs, actions = batch[sb.OBS].unsqueeze(1), batch[sb.ACTIONS].unsqueeze(1)
    uniform = torch.rand(8 * 4, 1, 2) * 2 - 1
    with torch.no_grad():
        pi, pi_logp = policy_sample(module, obs.repeat_interleave(4, 0))
    expected = td
    for j, critic in enumerate(module.critics):
        for i in range(8):
            sampled = torch.cat([uniform[4 * i:4 * i + 4, 0], pi[4 * i:4 * i + 4, 0]])  # 4 uniform, then 4 policy
            logp = torch.cat([torch.full((4,), -2 * math.log(2.0)), pi_logp[4 * i:4 * i + 4]])
            q = critic(torch.cat([obs[i].expand(8, 3), sampled], -1)).squeeze(-1)
            q_data = critic(torch.cat([obs[i, 0], actions[i, 0]])).squeeze(-1)
            expected = expected + cfg.cql_alpha * (torch.logsumexp(q - logp, 0) - math.log(8) - q_data) / 8
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert stats["td_loss"].item() == pytest.approx(td.item(), rel=1e-6)
    loss.backward()  # the penalty trains the critics only: no gradient reaches the actor through the policy samples
    assert all(p.grad is None for p in module.actor_parameters())
    assert all(p.grad is not None for p in module.critic_parameters())


def test_cql_picks_sacs_learner_for_box_actions_and_dqns_for_discrete(tmp_path):
    box = marl.CQLConfig().environment("Pendulum-v1").offline_data(input=str(tmp_path))
    assert box.continuous() and isinstance(box.algorithm_parts(), ContinuousCQLParts)
    assert [g.name for g in box.algorithm_parts().param_groups(box.training_cfg)] == ["critic", "actor", "alpha"]
    wf = box.default_workflow()
    tau = wf.graph.nodes["update_target"]["operator"].tau
    assert 0 < tau < 1  # Polyak per batch read
    discrete = marl.CQLConfig().environment("CartPole-v1").offline_data(input=str(tmp_path))
    assert not discrete.continuous() and discrete.module_class_for(discrete.policy_specs()["default_policy"]).endswith("QMLP")


@pytest.mark.slow
def test_cql_from_a_recorded_sac_pendulum_run_beats_its_untrained_self(tmp_path, ray_session):
    """The whole recording of a SAC run on Pendulum from scratch (5k env steps: random, then improving), then
    continuous CQL from the files alone: greedy return from about -1300 (untrained) to better than -400."""
    config = marl.load_scenario("scenarios/pendulum_sac.yaml", [f"offline.output={tmp_path / 'rec'}"])
    algo = config.build()
    try:
        while algo.train()["env_steps_total"] < 5000:
            pass
    finally:
        algo.stop()
    cql = (marl.CQLConfig().environment("Pendulum-v1").offline_data(input=str(tmp_path / "rec")).debugging(seed=0)
           .training(gamma=0.98, model={"hiddens": [64, 64], "activation": "relu"}).build())
    try:
        untrained = cql.evaluate(num_episodes=10, explore=False)["evaluation/episode_return_mean"]
        for _ in range(60):  # 60 reads of 2048 rows, 4 epochs each: 1,920 SGD steps
            cql.train()
        trained = cql.evaluate(num_episodes=10, explore=False)["evaluation/episode_return_mean"]
    finally:
        cql.stop()
    print(f"CQL greedy return: untrained {untrained:.1f}, trained {trained:.1f}")
    assert untrained < -900 and trained > -400, (untrained, trained)
