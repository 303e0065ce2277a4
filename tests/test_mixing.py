"""VDN and QMIX: joint transitions per group, the monotonic mixer, the loss, the graph, learning on simple_spread."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marl import QMIXConfig, VDNConfig
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.envs import make_env
from marl.errors import ConfigError
from marl.execution import metrics as m
from marl.modules.mixers import QMixer, VDNMixer
from marl.replay.joint import NEXT_STATE, STATE, join_group_steps, joint_transitions

SPREAD = ("mpe2.simple_spread_v3", {"N": 3, "max_cycles": 25})


def _agent_rows(steps=4, agents=(0, 1, 2), eps_id=7, obs_dim=2):
    """Per-agent rows as a runner builds them: grouped by agent, ordered by step."""
    rows = {k: [] for k in (sb.OBS, sb.NEXT_OBS, sb.ACTIONS, sb.REWARDS, sb.TERMINATEDS, sb.TRUNCATEDS, sb.SEGMENT_END, sb.EPS_ID, sb.T, sb.AGENT_INDEX)}
    for a in agents:
        for t in range(steps):
            rows[sb.OBS].append(np.full(obs_dim, 10 * a + t, np.float32))
            rows[sb.NEXT_OBS].append(np.full(obs_dim, 10 * a + t + 1, np.float32))
            rows[sb.ACTIONS].append(a)
            rows[sb.REWARDS].append(float(a + 1))
            rows[sb.TERMINATEDS].append(False)
            rows[sb.TRUNCATEDS].append(t == steps - 1)
            rows[sb.SEGMENT_END].append(t == steps - 1)
            rows[sb.EPS_ID].append(eps_id)
            rows[sb.T].append(t)
            rows[sb.AGENT_INDEX].append(a)
    return SampleBatch({k: np.asarray(v) for k, v in rows.items()})


def test_join_group_steps_builds_one_row_per_env_step():
    joint = join_group_steps(_agent_rows(), [0, 1, 2])
    assert len(joint) == 4
    assert joint[sb.OBS].shape == (4, 3, 2) and joint[sb.ACTIONS].shape == (4, 3)
    np.testing.assert_array_equal(joint[sb.OBS][:, :, 0], [[0, 10, 20], [1, 11, 21], [2, 12, 22], [3, 13, 23]])
    np.testing.assert_array_equal(joint[sb.ACTIONS][0], [0, 1, 2])
    np.testing.assert_allclose(joint[sb.REWARDS], 6.0)  # the team reward: the agents' rewards summed
    np.testing.assert_array_equal(joint[sb.SEGMENT_END], [False, False, False, True])

    tr = joint_transitions(_agent_rows(), [0, 1, 2], n_step=2, gamma=0.5)
    np.testing.assert_allclose(tr[sb.REWARDS], [9.0, 9.0, 9.0, 6.0])  # 6 + 0.5 * 6 until the piece ends
    np.testing.assert_allclose(tr["discounts"], [0.25, 0.25, 0.25, 0.5])
    np.testing.assert_array_equal(tr[STATE][1], tr[sb.OBS][1].ravel())
    np.testing.assert_array_equal(tr[NEXT_STATE][0], joint[sb.NEXT_OBS][1].ravel())  # two steps ahead


def test_join_refuses_agents_that_join_mid_episode():
    """Agents that leave are padded (tests/test_dead_agent_padding.py); one absent at the start, or back after leaving, is refused."""
    batch = _agent_rows()
    for away, said in ((0, "is absent at episode 7 step 0, the episode's first"), (1, "joins episode 7 step 2 after being absent")):
        keep = ~((batch[sb.AGENT_INDEX] == 2) & (batch[sb.T] == away))
        with pytest.raises(ConfigError, match=f"agent 2 {said} .*per agent") as err:
            join_group_steps(batch.take(np.flatnonzero(keep)), [0, 1, 2])
        assert "\n" not in str(err.value)  # the CLI prints it as its one line


def test_joined_observations_are_simple_spreads_global_state():
    env = make_env(SPREAD[0], dict(SPREAD[1]))
    obs, _ = env.reset(seed=3)
    for _ in range(3):
        np.testing.assert_array_equal(np.concatenate([obs[a] for a in env.possible_agents]), env.state())
        obs, *_ = env.step({a: 1 for a in env.possible_agents})
    env.close()


@pytest.mark.parametrize("seed", range(3))
def test_qmix_mixer_is_monotonic_in_every_agent_q(seed):
    torch.manual_seed(seed)
    mixer = QMixer(n_agents=3, state_dim=12, embed_dim=8, hypernet_embed=16)
    with torch.no_grad():  # weights far from their init: monotonicity must not depend on it
        for p in mixer.parameters():
            p.add_(torch.randn_like(p) * 2)
    state = torch.randn(256, 12) * 3
    w1, w2 = mixer.mixing_weights(state)
    assert (w1 >= 0).all() and (w2 >= 0).all()
    qs = (torch.randn(256, 3) * 10).requires_grad_(True)
    mixer(qs, state).sum().backward()
    assert (qs.grad >= 0).all()
    assert (qs.grad > 0).any()
    # raising one agent's Q never lowers Q_tot
    bumped = qs.detach().clone()
    bumped[:, 1] += torch.rand(256) * 5
    assert (mixer(bumped, state) >= mixer(qs.detach(), state) - 1e-5).all()


def test_vdn_mixer_sums():
    qs = torch.randn(5, 3)
    torch.testing.assert_close(VDNMixer()(qs), qs.sum(-1))


@pytest.mark.parametrize("config_cls", [VDNConfig, QMIXConfig])
def test_group_buffers_hold_joint_transitions_and_train(config_cls):
    algo = (
        config_cls()
        .environment(SPREAD[0], env_config=dict(SPREAD[1]))
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
        .training(num_steps_sampled_before_learning_starts=20, min_env_steps_per_iteration=100, target_network_update_freq=50,
                  train_batch_size=16, model={"hiddens": [16]})
        .debugging(seed=0)
        .build()
    )
    try:
        result = algo.train()
        module = algo.learners.local.module["default_policy"]
        assert type(module.mixer) is (VDNMixer if config_cls is VDNConfig else QMixer)
        buffer = algo.replay_buffers["default_policy"]
        assert len(buffer) == result["env_steps_total"]  # one joint row per env step, not one per agent
        assert buffer.columns[sb.OBS].shape[1:] == (3, 18) and buffer.columns[sb.ACTIONS].shape[1:] == (3,)
        assert buffer.columns[STATE].shape[1:] == (54,)
        assert result[f"counters/{m.TARGET_UPDATES}"] >= 1
        assert np.isfinite(result["losses/default_policy/loss"])
        assert "losses/default_policy/q_tot_mean" in result
    finally:
        algo.stop()


def test_agent_id_one_hot_reaches_the_agent_network():
    algo = QMIXConfig().environment(SPREAD[0], env_config=dict(SPREAD[1])).training(agent_id=True).build()
    module = algo.learners.local.module["default_policy"]
    obs = torch.zeros(1, 3, 18)
    q = module.agent_q_values(obs)[0]
    assert not torch.allclose(q[0], q[1])  # same observation, different agent: different Q values
    # acting: the runner passes each agent's index, so the one-hot matches the learner's
    acted = module.forward_inference({"obs": obs[0], "agent_index": torch.tensor([0, 1, 2])})["action_dist_inputs"]
    assert torch.equal(acted.argmax(-1), q.argmax(-1))
    algo.stop()
