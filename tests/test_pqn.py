"""PQN and PQN_VDN: the Q(lambda) returns, the LayerNorm Q network, no replay and no target copy, both data paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marl import PQNConfig, PQNVDNConfig
from marl.algorithms.live_agents import ALIVE
from marl.algorithms.pqn.loss import q_lambda_returns
from marl.algorithms.pqn_vdn.loss import joint_lambda_returns
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.modules.q_mlp import QMLP
from marl.runners.batched_runner import BatchedEnvRunner

import gymnasium as gym

SPREAD = ("mpe2.simple_spread_v3", {"N": 3, "max_cycles": 25})


def _rows(rewards, values, terminated, segment_end, bootstrap, **extra):
    n = len(rewards)
    cols = {sb.REWARDS: np.asarray(rewards, np.float32), sb.VF_PREDS: np.asarray(values, np.float32),
            sb.TERMINATEDS: np.asarray(terminated, bool), sb.SEGMENT_END: np.asarray(segment_end, bool),
            sb.BOOTSTRAP_VALUE: np.asarray(bootstrap, np.float32), sb.TRUNCATEDS: np.zeros(n, bool)}
    cols.update({k: np.asarray(v) for k, v in extra.items()})
    return SampleBatch(cols)


def _q_lambda_by_hand(r, v, done, end, boot, gamma, lam):
    """G_t = r_t + gamma (1 - d_t) [(1 - lambda) V(s_{t+1}) + lambda G_{t+1}], V(s_{T+1}) = bootstrap at a piece end."""
    out, g = np.zeros(len(r)), 0.0
    for t in reversed(range(len(r))):
        if end[t]:
            g = r[t] + gamma * (1 - done[t]) * boot[t]
        else:
            g = r[t] + gamma * (1 - done[t]) * ((1 - lam) * v[t + 1] + lam * g)
        out[t] = g
    return out


def test_q_lambda_returns_follow_the_recursion_and_stop_at_piece_ends():
    # two pieces: one cut by the fragment (bootstrapped from V(s_3) = 4), one that terminates
    r, v = [1.0, 0.0, 2.0, -1.0, 0.5], [3.0, 2.0, 1.0, 5.0, 7.0]
    done, end, boot = [0, 0, 0, 0, 1], [0, 0, 1, 0, 1], [0, 0, 4.0, 0, 0]
    for lam in (0.0, 0.3, 1.0):
        got = q_lambda_returns(_rows(r, v, done, end, boot), 0.9, lam)[sb.VALUE_TARGETS]
        np.testing.assert_allclose(got, _q_lambda_by_hand(r, v, done, end, boot, 0.9, lam), rtol=1e-6)
    one_step = q_lambda_returns(_rows(r, v, done, end, boot), 0.9, 0.0)[sb.VALUE_TARGETS]
    np.testing.assert_allclose(one_step[:2], [1.0 + 0.9 * 2.0, 0.0 + 0.9 * 1.0])  # lambda 0: r + gamma max Q(s')


def test_joint_returns_sum_the_team_rewards_and_values():
    """Two agents, three joint steps: rows grouped by agent (as runners build them) become steps [3, 2]."""
    agents, steps = [0, 1], 3
    r = [[1.0, 2.0], [0.0, 1.0], [3.0, 0.0]]  # [step][agent]
    v = [[1.0, 1.5], [2.0, 0.5], [0.0, 1.0]]
    rows = {k: [] for k in ("rewards", "values", "terminated", "segment_end", "bootstrap", "obs", "actions", "eps_id",
                            "t", "agent_index")}
    for a in agents:
        for t in range(steps):
            last = t == steps - 1
            row = {"rewards": r[t][a], "values": v[t][a], "terminated": False, "segment_end": last,
                   "bootstrap": 10.0 * (a + 1) if last else 0.0, "obs": [10 * a + t], "actions": a, "eps_id": 5, "t": t,
                   "agent_index": a}
            for key, value in row.items():
                rows[key].append(value)
    batch = _rows(rows["rewards"], rows["values"], rows["terminated"], rows["segment_end"], rows["bootstrap"],
                  **{sb.OBS: np.asarray(rows["obs"], np.float32), sb.ACTIONS: rows["actions"], sb.EPS_ID: rows["eps_id"],
                     sb.T: rows["t"], sb.AGENT_INDEX: rows["agent_index"]})
    joint = joint_lambda_returns(batch, agents, gamma=0.5, lambda_=0.5)
    assert len(joint) == steps and joint[sb.OBS].shape == (3, 2, 1) and joint[ALIVE].all()
    np.testing.assert_array_equal(joint[sb.OBS][:, :, 0], [[0, 10], [1, 11], [2, 12]])
    team_r, team_v = np.sum(r, axis=1), np.sum(v, axis=1)
    expected = _q_lambda_by_hand(team_r, team_v, [0, 0, 0], [0, 0, 1], [0, 0, 30.0], 0.5, 0.5)
    np.testing.assert_allclose(joint[sb.VALUE_TARGETS], expected, rtol=1e-6)


def test_the_q_network_has_layer_norm_and_reports_the_greedy_value():
    space = gym.spaces.Box(-1, 1, (4,), np.float32)
    module = QMLP(space, gym.spaces.Discrete(3), {"hiddens": [8, 8], "layer_norm": True, "dueling": False})
    assert sum(isinstance(m, torch.nn.LayerNorm) for m in module.modules()) == 2
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in QMLP(space, gym.spaces.Discrete(3), {"hiddens": [8]}).modules())
    obs = torch.randn(5, 4)
    q = module.q_values(obs)
    out = module.forward_exploration({"obs": obs})
    torch.testing.assert_close(out["vf_preds"], q.max(-1).values)
    mask = torch.tensor([[1.0, 0.0, 0.0]] * 5)
    torch.testing.assert_close(module.forward_exploration({"obs": obs, "action_mask": mask})["vf_preds"], q[:, 0])


@pytest.mark.parametrize("config_cls", [PQNConfig, PQNVDNConfig])
def test_one_update_on_the_dict_path_has_no_replay_and_no_target(config_cls):
    env, env_config = SPREAD
    cfg = (config_cls().environment(env, env_config=env_config)
           .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=25)
           .training(train_batch_size=300, minibatch_size=50, num_epochs=2, min_env_steps_per_iteration=0)
           .debugging(seed=0))
    algo = cfg.build()
    try:
        learner = algo.learners.local
        assert learner.targets == {} and algo.replay_buffers == {} and algo.workflow.graph.graph["name"] == cfg.algo_name.lower()
        ops = {algo.workflow.graph.nodes[n]["op"] for n in algo.workflow.graph}
        assert not ops & {"replay", "store_to_replay", "update_target"}, ops
        before = {k: v.clone() for k, v in learner.module["default_policy"].state_dict().items()}
        result = algo.train()
        prefix = "losses/default_policy/"
        rows_per_step = 1 if config_cls is PQNVDNConfig else 3  # joint steps, or one row per agent
        assert result[prefix + "num_sgd_steps"] == 2 * -(-100 * rows_per_step // 50)
        assert np.isfinite(result[prefix + "loss"]) and result["env_steps_total"] == 100
        after = learner.module["default_policy"].state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)
    finally:
        algo.stop()


@pytest.mark.parametrize("config_cls", [PQNConfig, PQNVDNConfig])
def test_the_batched_path_records_the_values_and_trains(config_cls):
    pytest.importorskip("vmas")
    cfg = (config_cls().environment("vmas.simple_spread", env_config={"continuous_actions": False, "max_steps": 25})
           .env_runners(num_envs_per_env_runner=16, rollout_fragment_length=10)
           .training(train_batch_size=480, minibatch_size=40, num_epochs=1, min_env_steps_per_iteration=0)
           .debugging(seed=0))
    algo = cfg.build()
    try:
        runner = algo.runners.local
        assert isinstance(runner, BatchedEnvRunner)
        rows = runner.sample().batch.policy_batches["default_policy"]
        module = runner.module["default_policy"]
        if config_cls is PQNConfig:  # the recorded V(s) is max_a Q(s, a) of the network that acted
            q = module.forward_train({"obs": torch.as_tensor(rows[sb.OBS])})["q_values"]
            np.testing.assert_allclose(rows[sb.VF_PREDS], q.max(-1).values.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert rows[sb.BOOTSTRAP_VALUE][rows[sb.SEGMENT_END] & ~rows[sb.TERMINATEDS]].std() > 0
        result = algo.train()
        assert np.isfinite(result["losses/default_policy/loss"])
    finally:
        algo.stop()
