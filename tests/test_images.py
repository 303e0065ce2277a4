"""Image observations: conv encoders by default, uint8 frames end to end, frame stacking, checkpoints."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.modules import ActorCriticMLP, CentralCriticMLP, QMLP
from marl.modules.catalog import ConvEncoder, FlatEncoder, FramesEncoder, PartsEncoder, encoder_for
from marl.runners import EnvRunner

IMAGE = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)


def quadrant_config(algo=marl.PPOConfig, env_config=None, **runners):
    cfg = (
        algo()
        .environment("tests.image_envs", env_config={"size": 16, **(env_config or {})})
        .env_runners(**({"num_envs_per_env_runner": 2, "rollout_fragment_length": 10} | runners))
        .debugging(seed=1)
    )
    return cfg


def test_encoders_follow_the_observation_space():
    assert isinstance(encoder_for(IMAGE), ConvEncoder)
    chw = encoder_for(gym.spaces.Box(0, 255, (4, 32, 32), np.uint8))
    assert chw.layout == "CHW" and chw.convs[0].in_channels == 4
    assert encoder_for(IMAGE).layout == "HWC" and encoder_for(IMAGE).convs[0].in_channels == 3
    grid = encoder_for(gym.spaces.Box(0.0, 1.0, (13, 13, 5), np.float32))  # a MAgent2-style map: HWC, small kernels
    assert grid.layout == "HWC" and grid.scale is None and grid.convs[0].kernel_size == (3, 3)
    flat = encoder_for(gym.spaces.Box(-1, 1, (7,), np.float32))
    assert isinstance(flat, FlatEncoder) and flat.out_dim == 7
    assert encoder_for(gym.spaces.Discrete(5)).out_dim == 5  # one-hot (made by the env->module pipeline)
    parts = encoder_for(gym.spaces.Dict({"image": IMAGE, "pos": gym.spaces.Box(-1, 1, (2,), np.float32)}))
    assert isinstance(parts, PartsEncoder) and parts.out_dim == parts.parts[0].out_dim + 2
    x = torch.cat([torch.full((2, 16 * 16 * 3), 255.0), torch.zeros(2, 2)], dim=1)
    assert parts(x).shape == (2, parts.out_dim)


def test_conv_options_on_flat_observations_are_said_once_not_ignored_silently(caplog):
    """(a flat vector, or a board of 2 axes: conv_filters there would build an MLP without a word; a board of 3 axes
    takes them, tests/test_board_conv.py.)"""
    flat = gym.spaces.Box(-1, 1, (11,), np.float32)
    with caplog.at_level("WARNING", logger="marl.modules.catalog"):
        for _ in range(3):
            assert isinstance(encoder_for(flat, {"conv_filters": [[8, 3, 1]]}), FlatEncoder)
        assert isinstance(encoder_for(gym.spaces.Box(0, 2, (6, 7), np.int8), {"conv_filters": [[8, 3, 1]]}), FlatEncoder)
    said = [r.getMessage() for r in caplog.records if "conv_filters" in r.getMessage()]
    assert len(said) == 2 and "(11,)" in said[0] and "neither images nor boards" in said[0] and "(6, 7)" in said[1]


def test_image_spaces_get_a_conv_encoder_in_the_default_modules():
    for module in (
        ActorCriticMLP(IMAGE, gym.spaces.Discrete(3)),
        QMLP(IMAGE, gym.spaces.Discrete(3)),
        CentralCriticMLP(IMAGE, gym.spaces.Discrete(3), {"state_dim": 10}),
    ):
        assert isinstance(module.encoder, ConvEncoder) and module.keeps_image_obs
    module = ActorCriticMLP(IMAGE, gym.spaces.Discrete(3), {"conv_filters": [[8, 4, 2], [8, 3, 1]], "hiddens": [32]})
    assert [c.out_channels for c in module.encoder.convs if isinstance(c, torch.nn.Conv2d)] == [8, 8]
    frames = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (5, 16, 16, 3), dtype=np.uint8))
    out = module.forward_exploration({"obs": frames})
    assert out["action_dist_inputs"].shape == (5, 3) and out["vf_preds"].shape == (5,)
    # uint8 frames are scaled to [0, 1] inside: the same numbers as the float frames / 255 through a float space
    float_module = ActorCriticMLP(gym.spaces.Box(0.0, 1.0, (16, 16, 3), np.float32), gym.spaces.Discrete(3),
                                  {"conv_filters": [[8, 4, 2], [8, 3, 1]], "hiddens": [32]})
    float_module.load_state_dict(module.state_dict())
    ref = float_module.forward_exploration({"obs": frames.float() / 255.0})
    assert torch.allclose(out["vf_preds"], ref["vf_preds"], atol=1e-5)


@pytest.mark.parametrize("model, words", [
    ({"conv_filters": [[16, 20, 4]]}, "leaves nothing"),
    ({"conv_filters": [[16, 4]]}, "[out_channels, kernel, stride]"),
    ({"conv_filters": [[16, 0, 1]]}, "[out_channels, kernel, stride]"),
    ({"hiddens": [64, -1]}, "model.hiddens"),
    ({"conv_activation": "sigmoid"}, "model.conv_activation"),
])
def test_bad_model_options_are_one_config_error(model, words):
    cfg = quadrant_config().training(model=model)
    with pytest.raises(ConfigError, match="conv_filters|hiddens|conv_activation") as err:
        cfg.build()  # the model check runs before any runner or learner starts
    assert words in str(err.value)


def test_image_batches_stay_uint8_through_runner_and_replay():
    cfg = quadrant_config()
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    batch = runner.sample()["default_policy"]
    assert isinstance(runner.module["default_policy"].encoder, ConvEncoder)
    assert batch[sb.OBS].dtype == np.uint8 and batch[sb.OBS].shape == (2 * 10 * 2, 16, 16, 1)
    assert batch[sb.OBS].max() == 255  # the frames as the env drew them, not scaled or normalised

    dqn = quadrant_config(marl.DQNConfig)
    dqn.validate()
    runner = EnvRunner(dqn, 0)
    batch = runner.sample()["default_policy"]
    assert batch[sb.OBS].dtype == np.uint8 and batch[sb.NEXT_OBS].dtype == np.uint8
    from marl.replay import ReplayBuffer

    buffer = ReplayBuffer(100)
    buffer.add(batch)
    assert buffer.columns[sb.OBS].dtype == np.uint8 and buffer.columns[sb.OBS].nbytes == 100 * 16 * 16
    sampled, _ = buffer.sample(8)
    q = runner.module["default_policy"].forward_train({"obs": torch.from_numpy(sampled[sb.OBS])})["q_values"]
    assert q.shape == (8, 4) and torch.isfinite(q).all()


def test_a_module_that_does_not_take_images_gets_them_flat_float32():
    cfg = quadrant_config().multi_agent(policies={"default_policy": {"module_class": "tests.test_images:FlatOnlyModule"}})
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    batch = runner.sample()["default_policy"]
    assert batch[sb.OBS].dtype == np.float32 and batch[sb.OBS].shape == (40, 16 * 16)
    assert runner.module["default_policy"].observation_space.shape == (16 * 16,)


class FlatOnlyModule(ActorCriticMLP):
    keeps_image_obs = False


def test_frame_stack_stacks_uint8_frames_on_the_channel_axis():
    for channels_first, shape in ((False, (16, 16, 3)), (True, (3, 16, 16))):
        cfg = quadrant_config(env_config={"channels_first": channels_first}, num_envs_per_env_runner=1,
                              rollout_fragment_length=6)
        cfg.connectors(env_to_module=[{"name": "frame_stack", "k": 3}])
        cfg.validate()
        runner = EnvRunner(cfg, 0)
        batch = runner.sample()["default_policy"]
        obs = batch[sb.OBS]
        axis = 1 if channels_first else 3
        assert obs.dtype == np.uint8 and obs.shape[axis] == 3 and obs.shape[1:] == shape
        encoder = runner.module["default_policy"].encoder
        assert encoder.convs[0].in_channels == 3 and encoder.layout == ("CHW" if channels_first else "HWC")
        a0 = batch[sb.AGENT_INDEX] == 0
        first, second = obs[a0][0], obs[a0][1]  # one agent's first two steps of its episode
        take = (lambda x, i: x[i]) if channels_first else (lambda x, i: x[..., i])
        assert not take(first, 0).any() and not take(first, 1).any() and take(first, 2).any()  # zeros before the first frame
        assert np.array_equal(take(second, 1), take(first, 2))  # the newest frame moves one place back


def test_mean_std_on_images_is_one_config_error_and_the_implicit_filter_skips_them():
    cfg = quadrant_config().connectors(env_to_module=["mean_std"])
    with pytest.raises(ConfigError, match="mean_std"):
        cfg.build()
    cfg = quadrant_config().env_runners(observation_filter="mean_std")
    cfg.validate()
    assert EnvRunner(cfg, 0).sample()["default_policy"][sb.OBS].dtype == np.uint8


def test_checkpoint_rebuilds_the_conv_module(tmp_path):
    cfg = quadrant_config().training(model={"conv_filters": [[8, 4, 2]], "hiddens": [32]}, train_batch_size=40,
                                      minibatch_size=20, num_epochs=1)
    algo = cfg.build()
    try:
        algo.train()
        path = algo.save(tmp_path / "ckpt")
        module = marl.load_module(path)
        assert isinstance(module.encoder, ConvEncoder) and module.encoder.convs[0].out_channels == 8
        manifest = marl.checkpoint.manifest.read_manifest(path)
        assert manifest["policies"]["default_policy"]["model"]["conv_filters"] == [[8, 4, 2]]
        frames = torch.from_numpy(np.full((3, 16, 16, 1), 255, np.uint8))
        trained = ActorCriticMLP(module.observation_space, module.action_space, module.model_config)
        trained.set_state(algo.get_weights()["modules"]["default_policy"])
        expected = trained.forward_inference({"obs": frames})["action_dist_inputs"]
        got = module.forward_inference({"obs": frames})["action_dist_inputs"]
        assert torch.allclose(got, expected)
    finally:
        algo.stop()


@pytest.mark.slow
def test_ppo_with_a_cnn_learns_to_read_the_image():
    """Chance earns 2 of 8 per episode; reading the quadrant from the pixels earns 8."""
    cfg = (
        quadrant_config(num_envs_per_env_runner=8, rollout_fragment_length=32)
        .training(lr=1e-3, train_batch_size=1024, minibatch_size=128, num_epochs=4, entropy_coeff=0.0,
                  model={"conv_filters": [[8, 4, 2], [16, 3, 2]], "hiddens": [64]})
    )
    algo = cfg.build()
    try:
        best = 0.0
        for _ in range(40):
            result = algo.train()
            ret = result["episode_return_mean"]
            best = max(best, ret / 2) if ret == ret else best  # two agents: per-agent return
            if best >= 7.0:
                break
        assert best >= 7.0, best
    finally:
        algo.stop()


@pytest.mark.slow
def test_mappo_with_conv_actor_and_critic_learns_to_read_the_image():
    """MAPPO on the quadrant task: the actor reads its frame, the critic both frames through one conv stack
    (FramesEncoder). Chance earns 2 of 8 per agent; reading the pixels earns 8."""
    cfg = (quadrant_config(marl.MAPPOConfig, num_envs_per_env_runner=8, rollout_fragment_length=32)
           .training(lr=1e-3, train_batch_size=1024, minibatch_size=128, num_epochs=4, entropy_coeff=0.0,
                     model={"conv_filters": [[8, 4, 2], [16, 3, 2]], "hiddens": [64]}))
    algo = cfg.build()
    try:
        assert isinstance(algo.learners.local.module["default_policy"].state_encoder, FramesEncoder)
        best = 0.0
        for _ in range(40):
            ret = algo.train()["episode_return_mean"]
            best = max(best, ret / 2) if ret == ret else best  # two agents: per-agent return
            if best >= 7.0:
                break
        assert best >= 7.0, best
    finally:
        algo.stop()


# -- a PettingZoo image env through `marl train` ------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
PISTONBALL = ROOT / "scenarios" / "pistonball_cnn.yaml"
SHORT = ["env_runners.num_envs_per_env_runner=1", "env_runners.rollout_fragment_length=16", "training.train_batch_size=96",
         "training.minibatch_size=48", "training.num_epochs=1"]
needs_butterfly = pytest.mark.skipif(
    importlib.util.find_spec("supersuit") is None or importlib.util.find_spec("pymunk") is None,
    reason="supersuit/pettingzoo[butterfly] not installed: pip install 'marl[butterfly]'",
)


@needs_butterfly
def test_pistonball_scenario_samples_uint8_frames_for_a_cnn():
    from marl.config.compose import load_scenario

    cfg = load_scenario(PISTONBALL, SHORT)
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    batch = runner.sample()["shared"]
    assert isinstance(runner.module["shared"].encoder, ConvEncoder)
    # 32x32 grey frames (SuperSuit), 3 stacked by the frame_stack connector, 6 pistons x 16 steps
    assert batch[sb.OBS].dtype == np.uint8 and batch[sb.OBS].shape == (6 * 16, 32, 32, 3)


@needs_butterfly
def test_pistonball_trains_through_marl_train_with_a_cnn(tmp_path):
    from marl import cli

    out = tmp_path / "run"
    assert cli.main(["train", str(PISTONBALL), *SHORT, "stop.iterations=2", "--quiet", "--output", str(out)]) == 0
    results = [json.loads(line) for line in (out / "result.jsonl").read_text().splitlines()]
    assert len(results) == 2 and results[-1]["env_steps_total"] == 32
    losses = {k: v for k, v in results[-1].items() if k.startswith("losses/")}
    assert losses and all(np.isfinite(v) for v in losses.values()), losses
    module = marl.load_module(out / "checkpoint", "shared")
    assert isinstance(module.encoder, ConvEncoder) and module.encoder.convs[0].in_channels == 3


def test_the_concepts_page_example_module_reuses_the_catalog_on_images():
    import re

    page = (ROOT / "docs" / "concepts.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)\n```", page, re.S) if "class MyModule" in b]
    namespace: dict = {}
    exec(block, namespace)
    cfg = quadrant_config(num_envs_per_env_runner=1, rollout_fragment_length=4)
    cfg.multi_agent(policies={"default_policy": {"module_class": namespace["MyModule"]}})
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    assert isinstance(runner.module["default_policy"].encoder, ConvEncoder)
    assert runner.sample()["default_policy"][sb.OBS].dtype == np.uint8


def test_frames_stay_uint8_through_ray_runners_and_replay(ray_session):
    import ray

    algo = (
        quadrant_config(marl.DQNConfig, num_env_runners=1)
        .training(num_steps_sampled_before_learning_starts=32, min_env_steps_per_iteration=40,
                  model={"conv_filters": [[8, 4, 2]], "hiddens": [32]})
        .build()
    )
    try:
        remote = ray.get(algo.runners.remote[0].sample.remote())["default_policy"]
        assert remote[sb.OBS].dtype == np.uint8 and remote[sb.OBS].shape[1:] == (16, 16, 1)
        for _ in range(2):
            result = algo.train()
        assert result["counters/learner_updates"] > 0
        columns = algo.replay_buffers["default_policy"].columns
        assert columns[sb.OBS].dtype == np.uint8 and columns[sb.NEXT_OBS].dtype == np.uint8
    finally:
        algo.stop()


@pytest.mark.parametrize("agent_id", [False, True])
def test_qmix_agents_read_frames_through_a_conv_encoder(agent_id):
    algo = (
        quadrant_config(marl.QMIXConfig, num_envs_per_env_runner=2, rollout_fragment_length=8)
        .training(agent_id=agent_id, num_steps_sampled_before_learning_starts=16,
                  model={"conv_filters": [[8, 4, 2]], "hiddens": [32]})
        .build()
    )
    try:
        module = algo.learners.local.module["default_policy"]
        assert isinstance(module.agent.encoder, ConvEncoder)
        for _ in range(3):
            result = algo.train()
        assert result["counters/learner_updates"] > 0
        columns = algo.replay_buffers["default_policy"].columns
        assert columns[sb.OBS].dtype == np.uint8 and columns[sb.OBS].shape[1:] == (2, 16, 16, 1)
        losses = [v for k, v in result.items() if k.startswith("losses/")]
        assert losses and np.all(np.isfinite(losses))
        frames = torch.from_numpy(np.full((1, 2, 16, 16, 1), 255, np.uint8))
        q = module.agent_q_values(frames)[0]
        acted = module.forward_inference({"obs": frames[0], "agent_index": torch.tensor([0, 1])})["action_dist_inputs"]
        assert torch.equal(acted.argmax(-1), q.argmax(-1))  # acting and learning read the same network
        assert agent_id == (not torch.allclose(q[0], q[1]))  # same frame: only the agent id tells them apart
    finally:
        algo.stop()


def test_model_options_per_policy():
    cfg = quadrant_config().training(model={"conv_filters": [[8, 4, 2]], "hiddens": [32]}).multi_agent(
        policies={"p0": {}, "p1": {"model": {"conv_filters": [[4, 3, 1], [4, 3, 1]]}}},
        policy_mapping_fn={"a0": "p0", "a1": "p1"},
    )
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    convs = {pid: [c.out_channels for c in runner.module[pid].encoder.convs if isinstance(c, torch.nn.Conv2d)] for pid in ("p0", "p1")}
    assert convs == {"p0": [8], "p1": [4, 4]}
    assert runner.module["p1"].pi[0].out_features == 32  # hiddens from training.model, under the policy's own


@pytest.mark.parametrize("recurrent", [None, "gru"])
def test_mappo_keeps_a_global_state_of_frames_uint8_and_its_critic_reads_each_frame_through_a_conv(recurrent):
    """No env state(): the global state is the agents' frames joined; it stays uint8 in batches (one row per
    env step) and the critic reads each agent's frame through one shared conv stack (scaled to [0, 1] there),
    the features joined in agent order."""
    model = {"conv_filters": [[8, 4, 2]], "hiddens": [32], "recurrent": recurrent, "max_seq_len": 4}
    algo = quadrant_config(marl.MAPPOConfig).training(model=model, train_batch_size=40, minibatch_size=20,
                                                     num_epochs=2).build()
    try:
        runner = algo.runners.local
        batch = runner.sample()["default_policy"]
        table = batch.tables[sb.STATE]
        assert table.dtype == np.uint8 and table.shape[1:] == (2 * 16 * 16,) and set(np.unique(table)) == {0, 255}
        module = algo.learners.local.module["default_policy"]
        state = torch.from_numpy(table[:3])
        encoder = module.state_encoder if recurrent is None else module.critic.encoder
        assert isinstance(encoder, FramesEncoder) and encoder.count == 2 and encoder.frame == (16, 16, 1)
        frames = state.reshape(3, 2, 16, 16, 1)
        expected = torch.cat([encoder.conv(frames[:, 0]), encoder.conv(frames[:, 1])], dim=1)  # agent order
        assert torch.equal(encoder.conv(frames[:, 0].float()), encoder.conv(frames[:, 0]))  # raw values, scaled inside
        if recurrent is None:
            inputs = {"state": state, "agent_index": torch.zeros(3, dtype=torch.int64)}
            read = module._state(inputs, module._ids(inputs))[:, : encoder.out_dim]
            torch.testing.assert_close(read, expected)  # (the agent id one-hot follows)
        else:
            torch.testing.assert_close(encoder(module.critic_input({"state": state})), expected)
        for _ in range(2):
            result = algo.train()
        assert np.isfinite(result["losses/default_policy/vf_loss"])
    finally:
        algo.stop()


@pytest.mark.parametrize("shape", [(84, 84, 3), (42, 42, 3), (7, 7, 3), (5, 5, 2), (5, 4, 26), (4, 5, 26), (3, 3, 1),
                                   (2, 9, 4), (1, 1, 8), (3, 5, 5)])
def test_the_default_conv_stack_fits_every_image_size(shape):
    # (3, 5, 5) is CHW: 5x5 frames of 3 channels; the rest HWC. Overcooked's layouts are 5x4 grids of 26 planes.
    space = gym.spaces.Box(0.0, 1.0, shape, np.float32)
    encoder = ConvEncoder(space)
    out = encoder(torch.from_numpy(np.stack([space.sample(), space.sample()])))
    assert out.shape == (2, encoder.out_dim) and encoder.out_dim > 0
