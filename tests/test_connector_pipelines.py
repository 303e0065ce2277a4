"""Connector pipelines end to end: config, pieces reaching the module, state through checkpoints and `marl evaluate`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import marl
from marl.algorithms import ConfigError, load_scenario
from marl.checkpoint.deploy import load_connectors
from marl.connectors import FrameStack, MeanStd
from marl.data import sample_batch as sb
from marl.runners import EnvRunner
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE_DIM, CARTPOLE_ACTIONS = 4, 2


def cartpole(**connectors):
    config = (
        marl.PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
        .training(train_batch_size=64, num_epochs=1, minibatch_size=32)
        .debugging(seed=3)
    )
    return config.connectors(**connectors) if connectors else config


def agent_pieces(batch):
    """(start, end) of each agent's episode piece in a batch (rows are contiguous per agent and episode, by t)."""
    keys = np.stack([batch[sb.EPS_ID], batch[sb.AGENT_INDEX]], 1)
    cuts = np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1
    return list(zip(np.r_[0, cuts], np.r_[cuts, len(keys)]))


# -- config ---------------------------------------------------------------------------------------
def test_section_round_trips_and_accepts_classes_and_objects():
    config = cartpole(
        env_to_module=["frame_stack", {"name": "prev_action_reward", "one_hot": False}, FrameStack(k=2)],
        learner=[{"name": "reward_scale", "scale": 0.5}, "tests.connector_pieces:RecordRewards"],
    )
    section = config.to_dict()["connectors"]
    assert section["env_to_module"] == [
        {"name": "frame_stack"}, {"name": "prev_action_reward", "one_hot": False},
        {"name": "frame_stack", "k": 2},
    ]
    assert section["learner"][1] == {"name": "tests.connector_pieces:RecordRewards"}
    again = marl.algorithms.config_from_dict(config.to_dict())
    assert again.to_dict() == config.to_dict()


@pytest.mark.parametrize(
    "connectors, message",
    [
        ({"env_to_module": [{"name": "frame_stak"}]}, r"'connectors.env_to_module\[0\].name': unknown env_to_module piece 'frame_stak'"),
        ({"env_to_module": [{"name": "frame_stack", "kk": 2}]}, r"'connectors.env_to_module\[0\].kk': FrameStack has no setting 'kk'; its settings: \['k'\]"),
        ({"env_to_module": [{"name": "frame_stack", "k": 0}]}, r"'connectors.env_to_module\[0\]' \(FrameStack\): k must be an integer >= 1, got 0"),
        ({"learner": [{"name": "tests.connector_pieces:NotAPiece"}]}, r"'connectors.learner\[0\].name'.*not a subclass of marl.connectors.ConnectorPiece"),
        ({"learner": [{"name": "tests.connector_pieces:Missing"}]}, r"'connectors.learner\[0\].name': piece 'tests.connector_pieces:Missing' cannot be imported"),
        ({"learner": [{"scale": 2}]}, r"'connectors.learner\[0\]' needs a 'name'"),
        ({"learner": {"name": "reward_scale"}}, r"'connectors.learner' must be list"),
        ({"policies": {"p": {"learnr": []}}}, r"unknown key 'connectors.policies.p.learnr'"),
        ({"module_to_env": [{"name": "reward_scale"}]}, r"unknown module_to_env piece 'reward_scale'"),
    ],
)
def test_bad_pieces_are_one_config_error_naming_the_key(connectors, message):
    config = marl.PPOConfig()
    with pytest.raises(ConfigError, match=message):
        config.connectors(**connectors)
    assert config.connectors_cfg.env_to_module == [] and config.connectors_cfg.learner == []  # all or nothing


def test_per_policy_pipeline_of_an_unknown_policy_is_named():
    config = cartpole(policies={"nobody": {"env_to_module": ["frame_stack"]}})
    with pytest.raises(ConfigError, match=r"'connectors.policies' names unknown policy 'nobody'; declared: \['default_policy'\]"):
        config.build()


def test_bad_piece_in_a_scenario_names_the_key(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("algo: PPO\nenvironment: {env: CartPole-v1}\nconnectors:\n  learner: [{name: reward_scale, scale: x}]\n")
    with pytest.raises(ConfigError, match=r"'connectors.learner\[0\]' \(RewardScale\): scale must be a number, got 'x'"):
        load_scenario(scenario)


# -- what reaches the module ----------------------------------------------------------------------
def test_frame_stack_and_previous_action_reward_reach_the_module():
    k = 3
    config = cartpole(env_to_module=[{"name": "frame_stack", "k": k}, {"name": "prev_action_reward"}])
    width = k * CARTPOLE_DIM + CARTPOLE_ACTIONS + 1
    runner = EnvRunner(config)
    assert runner.module["default_policy"].obs_dim == width
    batch = runner.sample()["default_policy"]
    obs, actions, rewards, t = batch[sb.OBS], batch[sb.ACTIONS], batch[sb.REWARDS], batch[sb.T]
    assert obs.shape[1] == width
    frames, prev_action, prev_reward = obs[:, : k * CARTPOLE_DIM], obs[:, k * CARTPOLE_DIM : -1], obs[:, -1]
    starts = checked = 0
    for lo, hi in agent_pieces(batch):
        if t[lo] == 0:  # the episode's first step: no history, no previous action or reward
            starts += 1
            assert not frames[lo, : (k - 1) * CARTPOLE_DIM].any()
            assert frames[lo, -CARTPOLE_DIM:].any()
            assert not prev_action[lo].any() and prev_reward[lo] == 0.0
        for i in range(lo + 1, hi):
            # the stack shifts by one observation; the previous row's action (one-hot) and reward follow
            np.testing.assert_array_equal(frames[i, :-CARTPOLE_DIM], frames[i - 1, CARTPOLE_DIM:])
            np.testing.assert_array_equal(prev_action[i], np.eye(CARTPOLE_ACTIONS)[actions[i - 1]])
            assert prev_reward[i] == rewards[i - 1] == 1.0
            checked += 1
    assert starts >= 2 and checked > 50
    # A fragment cut carries the stack on: the next fragment's first row of an env copy continues the last one.
    last = {int(e): i for i, e in enumerate(batch[sb.ENV_INDEX])}
    nxt = runner.sample()["default_policy"]
    for env, i in last.items():
        j = int(np.flatnonzero(nxt[sb.ENV_INDEX] == env)[0])
        if nxt[sb.EPS_ID][j] == batch[sb.EPS_ID][i]:
            np.testing.assert_array_equal(nxt[sb.OBS][j, : (k - 1) * CARTPOLE_DIM], obs[i, CARTPOLE_DIM : k * CARTPOLE_DIM])
            np.testing.assert_array_equal(nxt[sb.OBS][j, k * CARTPOLE_DIM : -1], np.eye(2)[actions[i]])


def test_bootstrap_observations_go_through_the_pipeline_without_advancing_it():
    """DQN's next_obs at a fragment cut is the stacked observation the agent acts on next."""
    config = (
        marl.DQNConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=16)
        .debugging(seed=1).connectors(env_to_module=[{"name": "frame_stack", "k": 2}, "prev_action_reward"])
    )
    runner = EnvRunner(config)
    first, second = runner.sample()["default_policy"], runner.sample()["default_policy"]
    within = (~first[sb.SEGMENT_END]).nonzero()[0]
    np.testing.assert_array_equal(first[sb.NEXT_OBS][within], first[sb.OBS][within + 1])
    cut = [i for i in np.flatnonzero(first[sb.SEGMENT_END]) if not first[sb.TERMINATEDS][i] and not first[sb.TRUNCATEDS][i]]
    assert cut
    for i in cut:
        j = int(np.flatnonzero((second[sb.EPS_ID] == first[sb.EPS_ID][i]) & (second[sb.T] == first[sb.T][i] + 1))[0])
        np.testing.assert_array_equal(first[sb.NEXT_OBS][i], second[sb.OBS][j])


def test_state_is_per_agent_and_per_env_copy():
    config = (
        marl.PPOConfig().environment("mpe2.simple_spread_v3", env_config={"N": 2, "max_cycles": 10})
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=12).debugging(seed=2)
        .connectors(env_to_module=[{"name": "frame_stack", "k": 2}, {"name": "prev_action_reward"}])
    )
    runner = EnvRunner(config)
    batch = runner.sample()["default_policy"]
    d = runner.envs[0].observation_space(runner.possible_agents[0]).shape[0]
    obs, t = batch[sb.OBS], batch[sb.T]
    pieces = agent_pieces(batch)
    assert len({(int(batch[sb.ENV_INDEX][lo]), int(batch[sb.AGENT_INDEX][lo])) for lo, _ in pieces}) == 4
    for lo, hi in pieces:
        if t[lo] == 0:
            assert not obs[lo, :d].any() and not obs[lo, 2 * d :].any()
        for i in range(lo + 1, hi):
            np.testing.assert_array_equal(obs[i, :d], obs[i - 1, d : 2 * d])
            np.testing.assert_allclose(obs[i, -1], batch[sb.REWARDS][i - 1], rtol=1e-6)


def test_turn_based_env_with_action_masks():
    """Connect Four (AEC, masked actions): an agent's stack and previous move advance only on its own turns."""
    config = (
        marl.PPOConfig().environment("pettingzoo.classic.connect_four_v3")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=16).debugging(seed=4)
        .connectors(env_to_module=[{"name": "frame_stack", "k": 2}, "prev_action_reward"])
    )
    runner = EnvRunner(config)
    d = 6 * 7 * 2
    assert runner.module["default_policy"].obs_dim == 2 * d + 7 + 1
    batch = runner.sample()["default_policy"]
    assert batch[sb.ACTION_MASK].shape[1] == 7
    obs, actions, t = batch[sb.OBS], batch[sb.ACTIONS], batch[sb.T]
    for lo, hi in agent_pieces(batch):
        if t[lo] <= 1:  # each player's first move
            assert not obs[lo, :d].any() and not obs[lo, 2 * d :].any()
        for i in range(lo + 1, hi):
            assert t[i] == t[i - 1] + 2
            np.testing.assert_array_equal(obs[i, :d], obs[i - 1, d : 2 * d])
            np.testing.assert_array_equal(obs[i, 2 * d : 2 * d + 7], np.eye(7)[actions[i - 1]])


def test_per_policy_pipelines():
    config = (
        marl.PPOConfig().environment("mpe2.simple_tag_v3", env_config={"num_good": 1, "max_cycles": 10})
        .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=8)
        .multi_agent(policies={"predator": None, "prey": None}, policy_mapping_fn={"adversary_*": "predator", "*": "prey"})
        .connectors(env_to_module=[{"name": "frame_stack", "k": 2}], policies={"prey": {"env_to_module": []}})
    )
    runner = EnvRunner(config)
    spaces = runner.get_spaces()
    assert runner.module["predator"].obs_dim == 2 * spaces["predator"][0].shape[0]
    assert runner.module["prey"].obs_dim == spaces["prey"][0].shape[0]


def test_reward_scale_changes_the_learners_rewards():
    config = cartpole(learner=[{"name": "reward_scale", "scale": 0.25}, "tests.connector_pieces:RecordRewards"])
    algo = config.build()
    try:
        algo.train()
        seen = algo.learners.local.connectors.learner["default_policy"].pieces["RecordRewards"]._last
        assert len(seen) == 64 and np.all(seen == 0.25)  # CartPole pays 1 per step
    finally:
        algo.stop()


def test_reward_clip_then_gae():
    from marl.algorithms.ppo.config import PPOParts
    from marl.connectors import compute_gae, learner_pipeline

    config = cartpole(learner=[{"name": "reward_clip", "limit": 0.5}]).resolved()  # PPO's `auto` keys set, as build does
    rng = np.random.default_rng(0)
    n = 10
    cols = {sb.REWARDS: rng.normal(0, 2, n).astype(np.float32), sb.VF_PREDS: rng.normal(size=n).astype(np.float32),
            sb.TERMINATEDS: np.zeros(n, bool), sb.SEGMENT_END: np.eye(n, dtype=bool)[-1], sb.BOOTSTRAP_VALUE: np.ones(n, np.float32)}
    out = learner_pipeline(config, "default_policy")(marl.data.SampleBatch(dict(cols)), PPOParts.learner_connectors(config.training_cfg))
    clipped = marl.data.SampleBatch({**cols, sb.REWARDS: np.clip(cols[sb.REWARDS], -0.5, 0.5)})
    expected = compute_gae(clipped, config.training_cfg.gamma, config.training_cfg.gae_lambda)
    np.testing.assert_array_equal(out[sb.VALUE_TARGETS], expected[sb.VALUE_TARGETS])


# -- defaults and shortcuts are today's behaviour --------------------------------------------------
def _weights(config, iterations=2):
    algo = config.build()
    try:
        for _ in range(iterations):
            algo.train()
        return algo.get_weights()
    finally:
        algo.stop()


def test_observation_filter_shortcut_is_the_mean_std_piece():
    shortcut = _weights(cartpole().env_runners(observation_filter="mean_std"))
    piece = _weights(cartpole(env_to_module=[MeanStd()]))
    assert shortcut["connectors"]["default_policy"]["mean_std"]["count"] == 128
    for key, value in shortcut["modules"]["default_policy"].items():
        np.testing.assert_array_equal(value, piece["modules"]["default_policy"][key])
    np.testing.assert_array_equal(shortcut["connectors"]["default_policy"]["mean_std"]["m2"],
                                  piece["connectors"]["default_policy"]["mean_std"]["m2"])


def test_explicit_default_pieces_change_nothing():
    """Listing what the defaults do (GAE is PPO's own; scale 1) gives the same weights as not listing it."""
    plain = _weights(cartpole())
    explicit = _weights(cartpole(learner=[{"name": "reward_scale", "scale": 1.0}], module_to_env=["clip_actions"]))
    for key, value in plain["modules"]["default_policy"].items():
        np.testing.assert_array_equal(value, explicit["modules"]["default_policy"][key])


def test_frame_stack_learns_to_balance_a_little():
    """A stacked-input policy trains (the learner's module has the runner's width)."""
    config = cartpole(env_to_module=[{"name": "frame_stack", "k": 2}, "prev_action_reward"])
    algo = config.build()
    try:
        results = [algo.train() for _ in range(2)]
        assert np.isfinite(results[-1]["losses/default_policy/policy_loss"])
        assert algo.learners.local.module["default_policy"].obs_dim == 2 * CARTPOLE_DIM + CARTPOLE_ACTIONS + 1
    finally:
        algo.stop()


# -- a user's piece: training, checkpoints, `marl evaluate` -----------------------------------------
def test_user_piece_state_survives_save_and_restore(tmp_path):
    config = cartpole(env_to_module=[{"name": "frame_stack", "k": 2}, {"name": "tests.connector_pieces:BiasFeature", "value": 0.5}])
    algo = config.build()
    try:
        algo.train()
        algo.train()
        algo.save(tmp_path / "ckpt")
        runner_state = algo.runners.local.connectors["default_policy"].get_state()
        central = algo.get_weights()["connectors"]["default_policy"]
        assert central == {"BiasFeature": 128}  # every training row, merged by the learner
        assert runner_state["env_to_module"]["pieces"]["BiasFeature"]["rows"] >= 128
        after = algo.train()
    finally:
        algo.stop()
    restored = marl.Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        again = restored.runners.local.connectors["default_policy"].get_state()
        assert again["env_to_module"]["pieces"]["BiasFeature"] == runner_state["env_to_module"]["pieces"]["BiasFeature"]
        np.testing.assert_array_equal(again["env_to_module"]["pieces"]["frame_stack"]["frames"],
                                      runner_state["env_to_module"]["pieces"]["frame_stack"]["frames"])
        assert restored.get_weights()["connectors"]["default_policy"] == central
        assert restored.train()["episode_return_mean"] == after["episode_return_mean"]  # the resume is exact
    finally:
        restored.stop()
    connectors = load_connectors(tmp_path / "ckpt")
    module = marl.load_module(tmp_path / "ckpt")
    ctx = connectors.rows([0], [0], [1], lambda: [0.0], update_stats=False)
    obs, _ = connectors.to_module([np.zeros(4, np.float32)], ctx)
    assert obs.shape == (1, module.obs_dim) == (1, 2 * CARTPOLE_DIM + 1) and obs[0, -1] == 0.5
    assert connectors.get_central() == {"BiasFeature": 128}


def test_user_piece_runs_in_training_and_in_marl_evaluate(tmp_path):
    scenario = tmp_path / "user_piece.yaml"
    scenario.write_text(
        "algo: PPO\nenvironment: {env: CartPole-v1}\n"
        "env_runners: {num_envs_per_env_runner: 2, rollout_fragment_length: 32}\n"
        "training: {train_batch_size: 64, num_epochs: 1}\nstop: {iterations: 1}\n"
        "connectors:\n  env_to_module:\n    - {name: frame_stack, k: 2}\n    - {name: 'tests.connector_pieces:BiasFeature', value: 2.0}\n"
    )
    log = tmp_path / "piece.log"
    env = {**os.environ, "MARL_TEST_PIECE_LOG": str(log), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_S)

    p = run("train", str(scenario), "--output", str(tmp_path / "run"), "--quiet")
    assert p.returncode == 0, p.stderr
    trained = log.read_text().splitlines()
    assert any(line.endswith("update_stats=True") for line in trained)  # the training runner's copy
    log.unlink()
    p = run("evaluate", str(tmp_path / "run" / "checkpoint"), "--episodes", "2")
    assert p.returncode == 0, p.stderr
    assert "evaluation/episodes: 2" in p.stdout
    evaluated = log.read_text().splitlines()
    assert evaluated and all(line.endswith("update_stats=False") for line in evaluated)  # the evaluation runner's copy
