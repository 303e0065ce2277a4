"""Recurrent Q networks (DQN, VDN/QMIX): sequence replay with stored states, burn-in, n-step targets inside
sequences, padding that counts for nothing, exact resume, and (slow) the recall task with GRU agents."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.learners.sequences import SequencePlan
from marl.runners import EnvRunner
from tests.test_recurrent import MEMORY_ENV, TWO_POLICIES


def test_n_step_targets_inside_replayed_sequences_match_a_step_by_step_sum():
    """y_t sums the rewards of up to n real steps from t and bootstraps from the window's last step (not after a
    termination); padded steps add nothing, and near a sequence's end the window shortens."""
    from marl.algorithms.dqn.loss import sequence_targets

    g = torch.Generator().manual_seed(0)
    b, length, gamma = 5, 7, 0.9
    lens = [7, 4, 1, 6, 7]
    mask = torch.tensor([[1.0] * n + [0.0] * (length - n) for n in lens])
    rewards = torch.randn(b, length, generator=g) * mask
    q_next = torch.randn(b, length, generator=g)
    terminated = torch.zeros(b, length, dtype=torch.bool)
    terminated[1, 3] = terminated[3, 5] = True  # rows ending their episode at their last real step
    for n_step in (1, 3):
        y = sequence_targets(rewards, terminated, mask, q_next, gamma, n_step)
        for i in range(b):
            for t in range(lens[i]):
                m = min(n_step, lens[i] - t)
                want = sum(gamma**k * rewards[i, t + k] for k in range(m))
                want = want + gamma**m * (0.0 if terminated[i, t + m - 1] else 1.0) * q_next[i, t + m - 1]
                torch.testing.assert_close(y[i, t], torch.as_tensor(want, dtype=y.dtype), msg=f"{n_step} {i} {t}")


def test_recurrent_dqn_trains_with_the_default_n_step():
    config = (marl.DQNConfig().environment(MEMORY_ENV).multi_agent(**TWO_POLICIES)
              .training(model={"hiddens": [16], "recurrent": "gru", "cell_size": 8}, num_steps_sampled_before_learning_starts=16,
                        min_env_steps_per_iteration=64).debugging(seed=1))
    assert config.training_cfg.n_step == 3
    algo = config.build()
    try:
        for _ in range(2):
            result = algo.train()
        assert result["losses/p0/num_sgd_steps"] > 0 and np.isfinite(result["losses/p0/loss"])
    finally:
        algo.stop()


# -- recurrent VDN/QMIX: sequence replay --------------------------------------------------------
def qmix_memory_config(recurrent="gru", **training):
    model = {"hiddens": [32], "recurrent": recurrent, "cell_size": 32, "max_seq_len": 8}
    return (
        marl.QMIXConfig()
        .environment(MEMORY_ENV, env_config={"num_cues": 4, "delay": 4})
        .env_runners(num_envs_per_env_runner=8, rollout_fragment_length=12)
        .training(**({"model": model, "train_batch_size": 32, "num_steps_sampled_before_learning_starts": 64,
                      "replay_capacity": 5000, "epsilon": [[0, 1.0], [20000, 0.05]], "target_network_update_freq": 400,
                      "lr": 1e-3, "training_intensity": None} | training))
        .debugging(seed=1)
    )


def test_qmix_replays_chunks_of_joint_steps_with_their_starting_states():
    from marl.replay.joint import STATE
    from marl.replay.sequences import SEQ_MASK, joint_sequences, state_start_column

    config = qmix_memory_config().env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
    config.validate()
    runner = EnvRunner(config)
    batch = sb.SampleBatch.concat([runner.sample()["default_policy"] for _ in range(2)])  # episodes cross the cut
    chunks = joint_sequences(batch, [0, 1], 8, ["h"])  # the config's max_seq_len
    obs, mask, h0 = chunks[sb.OBS], chunks[SEQ_MASK], chunks[state_start_column("h")]
    assert obs.shape[1:3] == (8, 2) and h0.shape[1:] == (2, 32) and chunks[STATE].shape[:2] == (len(chunks), 8)
    assert int(mask.sum()) == len(batch) // 2  # every joint step once, padding masked
    assert not obs[mask == 0].any()  # zero-padded
    # a chunk starting an episode starts from zeros; one inside an episode from the carried (non-zero) state
    starts = batch[sb.EPISODE_START]
    assert (~h0.any(axis=(1, 2))).sum() >= starts.sum() // 2 and h0.any(axis=(1, 2)).any()


def test_padded_steps_count_for_nothing_in_the_recurrent_qmix_loss():
    from marl.algorithms.mixing.loss import mixing_loss
    from marl.replay.sequences import joint_sequences

    config = qmix_memory_config().env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
    config.validate()
    runner = EnvRunner(config)
    module = runner.module["default_policy"]
    chunks = joint_sequences(runner.sample()["default_policy"], [0, 1], 8, ["h"])
    chunks["weights"] = np.ones(len(chunks), np.float32)
    assert (chunks["seq_mask"] == 0).any()

    class Cfg:
        gamma, double_q, td_error_loss, n_step = 0.99, True, "mse", 1

    def loss_and_grads(columns):
        module.zero_grad()
        loss, stats = mixing_loss(module, {k: torch.from_numpy(v) for k, v in columns.items()}, Cfg)
        loss.backward()
        return loss.detach(), {k: p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}

    loss, grads = loss_and_grads(chunks.columns)
    garbage = {k: v.copy() for k, v in chunks.items()}
    pad = garbage["seq_mask"] == 0
    rng = np.random.default_rng(0)
    for name in ("obs", "next_obs", "state", "next_state"):
        garbage[name][pad] = rng.normal(size=garbage[name][pad].shape)
    garbage["rewards"][pad] = 5.0
    garbage["actions"][pad] = 3
    other_loss, other_grads = loss_and_grads(garbage)
    torch.testing.assert_close(other_loss, loss, rtol=0, atol=1e-6)
    for name, grad in grads.items():
        torch.testing.assert_close(other_grads[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def _qmix_recall_rate(config, iterations: int) -> float:
    """Greedy recall rate per agent (team return / 2) over 64 episodes after training."""
    algo = config.build()
    try:
        for i in range(iterations):
            result = algo.train()
            if i >= 20 and result.get("episode_return_mean", 0) >= 1.9:
                break
        evaluation = algo.evaluate(64, unit="episodes")
    finally:
        algo.stop()
    return evaluation["evaluation/episode_return_mean"] / 2


@pytest.mark.slow
def test_qmix_with_gru_agents_recalls_the_cue():
    assert _qmix_recall_rate(qmix_memory_config("gru"), iterations=45) >= 0.9


@pytest.mark.slow
def test_qmix_with_memoryless_agents_cannot_beat_chance_on_the_recall_task():
    assert _qmix_recall_rate(qmix_memory_config(None), iterations=25) <= 0.4  # 4 cues: chance is 0.25


def dqn_memory_config(recurrent="gru", **training):
    model = {"hiddens": [32], "recurrent": recurrent, "cell_size": 32, "max_seq_len": 8}
    return (
        marl.DQNConfig()
        .environment(MEMORY_ENV, env_config={"num_cues": 4, "delay": 4})
        .env_runners(num_envs_per_env_runner=8, rollout_fragment_length=12)
        .multi_agent(**TWO_POLICIES)
        .training(**({"model": model, "n_step": 1, "train_batch_size": 32, "num_steps_sampled_before_learning_starts": 64,
                      "replay_capacity": 5000, "epsilon": [[0, 1.0], [20000, 0.05]], "target_network_update_freq": 400,
                      "lr": 3e-3, "training_intensity": None} | training))
        .debugging(seed=1)
    )


def _greedy_recall(config, iterations: int, every: int = 5) -> tuple[float, float]:
    """Greedy recall rate per policy over 64 episodes, checked every `every` iterations (stops at >= 0.95)."""
    algo = config.build()
    try:
        for i in range(iterations):
            algo.train()
            if i % every == every - 1 or i == iterations - 1:
                evaluation = algo.evaluate(64, unit="episodes", explore=False)
                rates = (evaluation["evaluation/policy_return_mean/p0"], evaluation["evaluation/policy_return_mean/p1"])
                if min(rates) >= 0.95:
                    break
    finally:
        algo.stop()
    return rates


@pytest.mark.slow
def test_dqn_with_a_gru_recalls_the_cue():
    rates = _greedy_recall(dqn_memory_config("gru"), iterations=40)  # reaches 1.0 at 10-21k env steps (seeds 1-3)
    assert min(rates) >= 0.9, rates


@pytest.mark.slow
def test_burn_in_lets_dqn_recall_across_chunks_shorter_than_the_memory_span():
    """max_seq_len 3 on 6-step episodes: the query's chunk never sees the cue. Burning in from the episode start
    (burn_in 3) lets it learn (1.0 at 32k env steps, seed 1); without burn-in it stayed at 0.47/0.78 at 63k. The cue
    lies in the burn-in steps only, so keeping it needs gradients through them (`burn_in_grad: true`); with R2D2's
    detached burn-in (the default) the same run ends at 0.61/0.25."""
    model = {"hiddens": [32], "recurrent": "gru", "cell_size": 32, "max_seq_len": 3}
    rates = _greedy_recall(dqn_memory_config(model=model, burn_in=3, burn_in_grad=True), iterations=45)
    assert min(rates) >= 0.9, rates


@pytest.mark.slow
def test_memoryless_dqn_cannot_beat_chance_on_the_recall_task():
    rates = _greedy_recall(dqn_memory_config(None), iterations=25, every=25)  # 4 cues: chance is 0.25
    assert max(rates) <= 0.4, rates


def test_burn_in_rows_start_earlier_from_a_stored_state_and_reach_the_chunks_own_state():
    """training.burn_in: the runner also stores the state where each chunk's burn-in begins; a replayed row starts
    there (never before its piece), its burn-in steps carry no loss (seq_mask 0), and running them from the
    stored state gives the chunk's steps the Q values they get from the state stored at the chunk's start."""
    from marl.replay.sequences import SEQ_MASK, agent_sequences, state_start_column

    model = {"hiddens": [32], "recurrent": "gru", "cell_size": 32, "max_seq_len": 4}
    config = dqn_memory_config(model=model, burn_in=2).env_runners(num_envs_per_env_runner=2, rollout_fragment_length=12)
    config.validate()
    runner = EnvRunner(config)
    batch = runner.sample()["p0"]
    plan = SequencePlan(batch[sb.SEGMENT_END], 4)
    np.testing.assert_array_equal(np.flatnonzero(batch[sb.STATE_IN_INDEX] >= 0), plan.stored_rows(2))
    assert len(plan.stored_rows(2)) > len(plan)  # 6-step episodes: the chunk at step 4 burns in from step 2
    burned, plain = agent_sequences(batch, 4, ["h"], burn_in=2), agent_sequences(batch, 4, ["h"])
    assert burned[sb.OBS].shape[1] == 6 and plain[sb.OBS].shape[1] == 4
    burn = (batch[sb.T][plan.starts] == 4)  # chunks that start mid-episode
    assert burn.any()
    np.testing.assert_array_equal(burned[SEQ_MASK][burn][:, :2], 0)  # burn-in steps: no loss
    np.testing.assert_array_equal(burned[SEQ_MASK][burn][:, 2:4], plain[SEQ_MASK][burn][:, :2])
    np.testing.assert_array_equal(burned[SEQ_MASK][~burn][:, :4], plain[SEQ_MASK][~burn])  # episode starts: none
    module = runner.module["p0"]
    with torch.no_grad():
        q_burned = module.q_sequences(torch.from_numpy(burned[sb.OBS][burn]),
                                      {"h": torch.from_numpy(burned[state_start_column("h")][burn])})
        q_plain = module.q_sequences(torch.from_numpy(plain[sb.OBS][burn]),
                                     {"h": torch.from_numpy(plain[state_start_column("h")][burn])})
    torch.testing.assert_close(q_burned[:, 2:4], q_plain[:, :2], rtol=0, atol=1e-5)


def test_padded_steps_count_for_nothing_in_the_recurrent_dqn_loss():
    from marl.algorithms.dqn.loss import dqn_loss
    from marl.replay.sequences import SEQ_MASK, agent_sequences, state_start_column

    config = dqn_memory_config().env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
    config.validate()
    runner = EnvRunner(config)
    module = runner.module["p0"]
    batch = runner.sample()["p0"]
    chunks = agent_sequences(batch, 8, ["h"])
    assert chunks[sb.OBS].shape[1] == 8 and chunks[state_start_column("h")].shape[1:] == (32,)
    assert int(chunks[SEQ_MASK].sum()) == len(batch) and (chunks[SEQ_MASK] == 0).any()
    chunks["weights"] = np.ones(len(chunks), np.float32)

    class Cfg:
        gamma, double_q, td_error_loss, n_step = 0.99, True, "huber", 1

    def loss_and_grads(columns):
        module.zero_grad()
        loss, _ = dqn_loss(module, {k: torch.from_numpy(v) for k, v in columns.items()}, Cfg, target=module)
        loss.backward()
        return loss.detach(), {k: p.grad.clone() for k, p in module.named_parameters() if p.grad is not None}

    loss, grads = loss_and_grads(chunks.columns)
    garbage = {k: v.copy() for k, v in chunks.items()}
    pad = garbage[SEQ_MASK] == 0
    garbage[sb.OBS][pad] = 7.0
    garbage[sb.NEXT_OBS][pad] = -3.0
    garbage[sb.REWARDS][pad] = 5.0
    other_loss, other_grads = loss_and_grads(garbage)
    torch.testing.assert_close(other_loss, loss, rtol=0, atol=1e-6)
    for name, grad in grads.items():
        torch.testing.assert_close(other_grads[name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_recurrent_qmix_restore_continues_bit_identically(tmp_path):
    """Sequence replay (chunks with their stored states), the GRU agents and the runners' carried states:
    all in the checkpoint."""
    config = qmix_memory_config(num_steps_sampled_before_learning_starts=8, min_env_steps_per_iteration=60,
                                target_network_update_freq=100, train_batch_size=8).env_runners(
        num_envs_per_env_runner=2, rollout_fragment_length=10)
    algo = config.build()
    try:
        for _ in range(2):
            algo.train()
        algo.save(tmp_path / "ckpt")
        saved = {k: v.copy() for k, v in algo.get_weights()["modules"]["default_policy"].items()}
        for _ in range(2):
            result = algo.train()
        straight = algo.get_weights()["modules"]
        assert result["losses/default_policy/num_sgd_steps"] > 0
        assert any(not np.array_equal(saved[k], straight["default_policy"][k]) for k in saved if "core" in k)
        algo.restore(tmp_path / "ckpt")
        for _ in range(2):
            algo.train()
        for key, value in straight["default_policy"].items():
            np.testing.assert_array_equal(algo.get_weights()["modules"]["default_policy"][key], value, err_msg=key)
    finally:
        algo.stop()


def test_burn_in_is_the_replayed_algorithms_own_key_per_policy():
    """`sequence_chunking` reads burn-in from the policy's plan (`plan_for(pid).burn_in`): DQN's `training.burn_in`, 0 for an
    algorithm without one (PPO), and in a MIXED run each policy's own algorithm's."""
    from marl.modules.recurrent import sequence_chunking

    assert sequence_chunking(dqn_memory_config(burn_in=3), "p0") == (8, 3)
    ppo = marl.PPOConfig().environment(MEMORY_ENV).multi_agent(**TWO_POLICIES).training(model={"recurrent": "gru", "max_seq_len": 6})
    assert sequence_chunking(ppo, "p0") == (6, 0)
    mixed = marl.MixedConfig().environment(MEMORY_ENV).multi_agent(**TWO_POLICIES).training(algorithms={
        "p0": {"algo": "DQN", "burn_in": 2, "model": {"recurrent": "gru", "max_seq_len": 5}},
        "p1": {"algo": "PPO", "model": {"recurrent": "gru", "max_seq_len": 7}},
    })
    assert sequence_chunking(mixed, "p0") == (5, 2) and sequence_chunking(mixed, "p1") == (7, 0)
