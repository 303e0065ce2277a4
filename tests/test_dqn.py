"""DQN: Q-module acting, next_obs collection, the loss, target networks, the two-branch graph, multi-agent buffers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from marl import DQNConfig
from marl.algorithms.dqn.loss import dqn_loss
from marl.algorithms.dqn.workflow import round_robin_weights
from marl.data import sample_batch as sb
from marl.execution import metrics as m
from marl.modules import QMLP
from marl.modules.q_mlp import piecewise_linear
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS
from marl.runners import EnvRunner


def test_epsilon_greedy_distribution_and_masks():
    module = QMLP(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4), {"hiddens": [8], "dueling": True})
    obs = torch.randn(5, 3)
    q = module.q_values(obs).detach()
    module.epsilon = 0.4
    logits = module.forward_exploration({"obs": obs})["action_dist_inputs"]
    probs = logits.softmax(-1)
    greedy = q.argmax(-1)
    np.testing.assert_allclose(probs[torch.arange(5), greedy].numpy(), 0.6 + 0.4 / 4, rtol=1e-5)
    # masks: illegal actions get nothing, eps spreads over the legal ones only, greedy is the best legal one
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0]]).repeat(5, 1)
    probs = module.forward_exploration({"obs": obs, "action_mask": mask})["action_dist_inputs"].softmax(-1)
    assert torch.all(probs[:, [1, 3]] < 1e-12)
    best_legal = q[:, [0, 2]].argmax(-1) * 2
    np.testing.assert_allclose(probs[torch.arange(5), best_legal].numpy(), 0.6 + 0.4 / 2, rtol=1e-5)
    greedy_logits = module.forward_inference({"obs": obs, "action_mask": mask})["action_dist_inputs"]
    assert torch.equal(greedy_logits.argmax(-1), best_legal)


def test_epsilon_schedule_is_piecewise_linear():
    sched = [[0, 1.0], [100, 0.1], [200, 0.05]]
    assert piecewise_linear(sched, -5) == 1.0
    assert piecewise_linear(sched, 50) == pytest.approx(0.55)
    assert piecewise_linear(sched, 150) == pytest.approx(0.075)
    assert piecewise_linear(sched, 10_000) == 0.05


def test_runner_fills_next_obs_from_the_env():
    cfg = DQNConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=3, rollout_fragment_length=5).debugging(seed=0)
    runner = EnvRunner(cfg, 0)
    for _ in range(20):
        b = runner.sample()["default_policy"]
        live = ~b[sb.TERMINATEDS]
        # CartPole's physics: x' = x + 0.02 * x_dot, whether next_obs came from the next row or from the cut
        np.testing.assert_allclose(b[sb.NEXT_OBS][live, 0], b[sb.OBS][live, 0] + 0.02 * b[sb.OBS][live, 1], atol=1e-4)
    runner.stop()


def _toy_batch(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return {
        sb.OBS: torch.tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
        sb.NEXT_OBS: torch.tensor(rng.normal(size=(n, 3)), dtype=torch.float32),
        sb.ACTIONS: torch.tensor(rng.integers(0, 4, n)),
        sb.REWARDS: torch.tensor(rng.normal(size=n), dtype=torch.float32),
        sb.TERMINATEDS: torch.tensor([False, True] * (n // 2)),
        DISCOUNTS: torch.full((n,), 0.9**2),
        REPLAY_WEIGHTS: torch.tensor(rng.random(n), dtype=torch.float32),
    }


def _toy_q_setup(double_q: bool):
    """Online and target Q networks (seeded), a DQN training section and the toy batch."""
    space = gym.spaces.Box(-1, 1, (3,))
    torch.manual_seed(0)
    online = QMLP(space, gym.spaces.Discrete(4), {"hiddens": [8]})
    target = QMLP(space, gym.spaces.Discrete(4), {"hiddens": [8]})
    cfg = DQNConfig().training(double_q=double_q, td_error_loss="mse").training_cfg
    return online, target, cfg, _toy_batch()


@pytest.mark.parametrize("double_q", [True, False])
def test_dqn_loss_targets_by_hand(double_q):
    online, target, cfg, batch = _toy_q_setup(double_q)
    loss, stats = dqn_loss(online, batch, cfg, target=target)
    with torch.no_grad():
        q_next_t = target.q_values(batch[sb.NEXT_OBS])
        chooser = online.q_values(batch[sb.NEXT_OBS]) if double_q else q_next_t
        a_star = chooser.argmax(1)
        y = batch[sb.REWARDS] + batch[DISCOUNTS] * (~batch[sb.TERMINATEDS]).float() * q_next_t[torch.arange(6), a_star]
        q = online.q_values(batch[sb.OBS])[torch.arange(6), batch[sb.ACTIONS]]
        expected = (batch[REPLAY_WEIGHTS] * 0.5 * (q - y) ** 2).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    np.testing.assert_allclose(stats["td_error"].numpy(), (q - y).abs().numpy(), rtol=1e-5)


@pytest.mark.parametrize("double_q", [True, False])
def test_dqn_target_maximises_over_the_legal_next_actions_only(double_q):
    online, target, cfg, batch = _toy_q_setup(double_q)
    with torch.no_grad():
        q_next_t = target.q_values(batch[sb.NEXT_OBS])
        chooser = online.q_values(batch[sb.NEXT_OBS]) if double_q else q_next_t
    # forbid each row's favourite next action; row 5 has no mask information (all zeros: every action stays)
    mask = torch.ones(6, 4)
    mask[torch.arange(6), chooser.argmax(1)] = 0.0
    mask[5] = 0.0
    batch[sb.NEXT_ACTION_MASK] = mask
    a_star = chooser.masked_fill(mask == 0, float("-inf")).argmax(1)
    a_star[5] = chooser[5].argmax()
    y = batch[sb.REWARDS] + batch[DISCOUNTS] * (~batch[sb.TERMINATEDS]).float() * q_next_t[torch.arange(6), a_star]
    _, stats = dqn_loss(online, batch, cfg, target=target)
    with torch.no_grad():
        q = online.q_values(batch[sb.OBS])[torch.arange(6), batch[sb.ACTIONS]]
    np.testing.assert_allclose(stats["td_error"].numpy(), (q - y).abs().numpy(), rtol=1e-5)
    assert (a_star[:5] != chooser[:5].argmax(1)).all()  # the masked target differs from the unmasked one


def test_runner_records_the_legal_actions_at_next_obs():
    """Connect Four: a column is legal at next_obs exactly when its top cell is empty there."""
    cfg = DQNConfig().environment("pettingzoo.classic.connect_four_v3").env_runners(
        num_envs_per_env_runner=3, rollout_fragment_length=7).debugging(seed=0)
    runner = EnvRunner(cfg, 0)
    checked = 0
    for _ in range(15):
        b = runner.sample()["default_policy"]
        live = ~b[sb.TERMINATEDS]
        top_row_empty = b[sb.NEXT_OBS][live].reshape(-1, 6, 7, 2)[:, 0].sum(-1) == 0
        np.testing.assert_array_equal(b[sb.NEXT_ACTION_MASK][live] > 0.5, top_row_empty)
        checked += int(live.sum())
    runner.stop()
    assert checked > 100


def test_learner_target_network_updates():
    from marl.learners import Learner
    from marl.policies import resolve_policies
    from marl.envs import make_env

    cfg = DQNConfig().environment("CartPole-v1").debugging(seed=0)
    env = make_env("CartPole-v1", {})
    specs, _ = resolve_policies(env, cfg.policy_specs(), cfg.policy_mapping())
    learner = Learner(cfg, specs)
    online, target = learner.module["default_policy"], learner.targets["default_policy"]["target"]
    assert not any(p.requires_grad for p in target.parameters())
    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    learner.update_target(tau=0.25)
    for k, v in target.state_dict().items():
        torch.testing.assert_close(v, 0.75 * before[k] + 0.25 * online.state_dict()[k])
    learner.update_target(tau=1.0)
    for k, v in target.state_dict().items():
        torch.testing.assert_close(v, online.state_dict()[k])


def test_training_intensity_sets_the_round_robin():
    cfg = DQNConfig().env_runners(num_envs_per_env_runner=4, rollout_fragment_length=4).training(train_batch_size=64, training_intensity=None)
    assert round_robin_weights(cfg) == [1, 1]  # null: one update per sampling round
    cfg.training(training_intensity=32)  # 16 env steps per round -> 512 replayed rows -> 8 updates
    assert round_robin_weights(cfg) == [1, 8]
    cfg.training(training_intensity=1)  # 16 replayed rows per round -> one update every 4 rounds
    assert round_robin_weights(cfg) == [4, 1]


def test_workflow_shows_both_branches():
    algo = DQNConfig().environment("CartPole-v1").training(num_steps_sampled_before_learning_starts=64).build()
    try:
        g = algo.workflow.graph
        assert [g.nodes[n]["op"] for n in ("sample", "store", "replay", "learn", "update_priorities", "update_target", "sync_weights", "join", "report")]
        assert list(g.predecessors("store")) == ["sample"]
        assert set(g.predecessors("join")) == {"store", "sync_weights"}
        assert g.edges["store", "join"]["kind"] == "stored"
        assert g.edges["replay", "learn"]["kind"] == "batch"
        result = algo.train()
        assert result["counters/learner_updates"] > 0
        assert result["counters/target_updates"] >= 1
        assert np.isfinite(result["losses/default_policy/loss"])
        assert "losses/default_policy/td_error" not in result  # per-row arrays stay out of results
    finally:
        algo.stop()


def test_multi_agent_dqn_keeps_one_buffer_per_policy():
    # agent_0 -> "solo", agents 1 and 2 -> "pair": each buffer must hold only its agents' transitions.
    algo = (
        DQNConfig()
        .environment("mpe2.simple_spread_v3", env_config={"N": 3, "max_cycles": 25})
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
        .multi_agent(policies=["solo", "pair"], policy_mapping_fn={"agent_0": "solo", "*": "pair"})
        .training(
            num_steps_sampled_before_learning_starts=50,
            min_env_steps_per_iteration=200,
            target_network_update_freq=100,
            prioritized_replay=True,
        )
        .debugging(seed=0)
        .build()
    )
    try:
        for _ in range(2):
            result = algo.train()
        buffers = algo.replay_buffers
        assert set(buffers) == {"solo", "pair"}
        solo, pair = buffers["solo"], buffers["pair"]
        assert set(np.unique(solo.columns[sb.AGENT_INDEX][: len(solo)])) == {0}
        assert set(np.unique(pair.columns[sb.AGENT_INDEX][: len(pair)])) == {1, 2}
        assert len(pair) == 2 * len(solo)  # two agents' rows per env step against one
        for pid in ("solo", "pair"):
            assert result[f"counters/{m.TARGET_UPDATES}/{pid}"] >= 1
            assert result[f"counters/{m.AGENT_STEPS_TRAINED}/{pid}"] > 0
            assert np.isfinite(result[f"losses/{pid}/loss"])
        # replayed TD errors became priorities: no longer all equal to the initial max priority
        priorities = solo.sum_tree[np.arange(len(solo))]
        assert len(np.unique(priorities)) > 1
    finally:
        algo.stop()


def test_the_cartpole_scenario_is_dqns_defaults_so_the_defaults_test_trains_it():
    """scenarios/cartpole_dqn.yaml spells out DQN's defaults on CartPole-v1 (a user reads the knobs there); its
    training section resolves to exactly the defaults', so tests/test_defaults_learn_off_policy.py's DQN-CartPole run
    trains it (a separate 60k-step run of it cost the suite ~65 s for the same config on another seed)."""
    from marl import load_scenario
    from marl.algorithms import config_from_dict

    scenario = load_scenario("scenarios/cartpole_dqn.yaml").to_dict()
    defaults = config_from_dict({"algo": "DQN", "environment": {"env": "CartPole-v1"}}, []).to_dict()
    assert scenario["training"] == defaults["training"] and scenario["environment"] == defaults["environment"]
    assert scenario["stop"]["episode_return_mean"] == 450  # the defaults test's threshold


def _behaviour_logp(actor, batch):
    """The log-probs of a batch's actions under the runner's epsilon-greedy policy, asked of the runner
    (DQN's runners compute no log-probs while sampling)."""
    import ray

    def logp(runner, obs, actions):
        module = runner.module["default_policy"]
        out = module.forward_exploration({"obs": torch.from_numpy(obs)})
        return module.action_dist(out["action_dist_inputs"]).logp(torch.from_numpy(actions)).numpy()

    return ray.get(actor.__ray_call__.remote(logp, batch[sb.OBS], batch[sb.ACTIONS]))


def test_dqn_on_ray_runners_samples_with_scheduled_epsilon(ray_session):
    import ray

    algo = (
        DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=2, num_envs_per_env_runner=2, rollout_fragment_length=8)
        .training(num_steps_sampled_before_learning_starts=64, min_env_steps_per_iteration=160,
                  epsilon=[[0, 1.0], [320, 0.0]], model={"hiddens": [32]})
        .build()
    )
    try:
        first = ray.get(algo.runners.remote[0].sample.remote())["default_policy"]
        # epsilon 1 at the start: uniform over CartPole's two actions
        np.testing.assert_allclose(_behaviour_logp(algo.runners.remote[0], first), np.log(0.5), rtol=1e-5)
        for _ in range(3):
            result = algo.train()
        assert result["counters/learner_updates"] > 0
        assert len(algo.replay_buffers["default_policy"]) == result["counters/env_steps_sampled"]
        # each runner estimates the run's env steps as its own (~240) x 2 runners: past 320, epsilon is 0 (greedy)
        later = ray.get(algo.runners.remote[1].sample.remote())["default_policy"]
        np.testing.assert_allclose(_behaviour_logp(algo.runners.remote[1], later), 0.0, atol=1e-6)
    finally:
        algo.stop()
