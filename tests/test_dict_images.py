"""Dict/Tuple observations with image parts: one encoder per part, and the frames stay uint8 end to end
(packed into one byte row per observation: `marl.modules.parts`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.modules.catalog import ConvEncoder, FlatEncoder, PartsEncoder, encoder_for
from marl.modules.parts import PartsLayout
from marl.runners import EnvRunner

IMAGE = gym.spaces.Box(0, 255, (8, 8, 1), np.uint8)
SPACE = gym.spaces.Dict({
    "image": IMAGE,
    "flip": gym.spaces.Discrete(3),
    "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    "nested": gym.spaces.Tuple((gym.spaces.Box(0.0, 1.0, (5, 6, 6), np.float32), gym.spaces.Discrete(2))),
})


def dict_config(algo=marl.PPOConfig, **training):
    return (
        algo()
        .environment("tests.image_envs", env_config={"size": 16, "dict_obs": True})
        .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=16)
        .training(**({"model": {"conv_filters": [[8, 4, 2], [16, 3, 2]], "hiddens": [64]}} | training))
        .debugging(seed=1)
    )


def test_packed_rows_unpack_to_each_part_exactly_and_frames_take_one_byte_per_pixel():
    layout = PartsLayout(SPACE)
    # leaves in the space's part order (Dict keys sorted by gymnasium), nested Tuple with an image opened
    assert [path for path, _, _ in layout.leaves] == [("flip",), ("image",), ("nested", 0), ("nested", 1), ("pos",)]
    assert layout.nbytes == 4 * (3 + 5 * 6 * 6 + 2 + 2) + 8 * 8  # floats as float32, pixels as bytes
    SPACE.seed(0)
    items = [SPACE.sample() for _ in range(5)]
    rows = layout.pack(items)
    assert rows.dtype == np.uint8 and rows.shape == (5, layout.nbytes)
    parts = layout.unpack(torch.from_numpy(rows))
    for j, item in enumerate(items):
        assert parts[1].dtype == torch.uint8 and torch.equal(parts[1][j], torch.from_numpy(item["image"]))
        np.testing.assert_array_equal(parts[0][j].numpy(), np.eye(3, dtype=np.float32)[item["flip"]])
        np.testing.assert_array_equal(parts[2][j].numpy(), item["nested"][0])
        np.testing.assert_array_equal(parts[4][j].numpy(), item["pos"])
    # the encoder reads packed rows and gymnasium's float flattening alike: the same features
    torch.manual_seed(0)
    encoder = encoder_for(SPACE, {"hiddens": [8]})
    assert isinstance(encoder, PartsEncoder)
    assert [type(e) for e in encoder.parts] == [FlatEncoder, ConvEncoder, ConvEncoder, FlatEncoder, FlatEncoder]
    flat = torch.from_numpy(np.stack([gym.spaces.flatten(SPACE, o) for o in items]).astype(np.float32))
    torch.testing.assert_close(encoder(torch.from_numpy(rows)), encoder(flat), rtol=1e-6, atol=1e-6)
    # packed bytes that travelled as float32 values (offline data's vectors) read the same
    torch.testing.assert_close(encoder(torch.from_numpy(rows.astype(np.float32))), encoder(flat), rtol=1e-6, atol=1e-6)


def test_ppo_on_a_dict_observation_with_an_image_keeps_the_frames_uint8_and_trains(tmp_path):
    algo = dict_config(train_batch_size=128, minibatch_size=64, num_epochs=2).build()
    try:
        module = algo.learners.local.module["default_policy"]
        assert isinstance(module.encoder, PartsEncoder) and isinstance(module.encoder.parts[1], ConvEncoder)
        runner = algo.runners.local
        batch = runner.sample()["default_policy"]
        layout = module.encoder.layout
        obs = batch[sb.OBS]
        assert obs.dtype == np.uint8 and obs.shape[1:] == (layout.nbytes,)
        assert obs.nbytes / len(obs) < 16 * 16 + 4 * 10  # one byte per pixel, not four
        # the image part of each row is the env's frame, byte for byte
        frames = layout.unpack(torch.from_numpy(obs))[1]  # parts: flip, image, noise
        assert frames.dtype == torch.uint8 and frames.shape[1:] == (16, 16, 1) and set(frames.unique().tolist()) == {0, 255}
        before = {k: v.copy() for k, v in algo.get_weights()["modules"]["default_policy"].items()}
        for _ in range(3):
            result = algo.train()
        assert result["losses/default_policy/num_sgd_steps"] > 0
        after = algo.get_weights()["modules"]["default_policy"]
        assert any(not np.array_equal(before[k], after[k]) for k in before if "encoder.parts.1" in k)  # the conv learns
        algo.save(tmp_path / "ckpt")
        evaluation = algo.evaluate(4, unit="episodes")
        assert evaluation["evaluation/episodes"] == 4
    finally:
        algo.stop()
    loaded = marl.load_module(tmp_path / "ckpt", "default_policy")  # rebuilt with its per-part encoders
    rows = torch.from_numpy(obs[:5])
    torch.testing.assert_close(loaded.forward_inference({"obs": rows})["action_dist_inputs"],
                               module.forward_inference({"obs": rows})["action_dist_inputs"])


def test_dqn_replay_keeps_packed_dict_observations_uint8():
    algo = dict_config(marl.DQNConfig, num_steps_sampled_before_learning_starts=32, min_env_steps_per_iteration=64).build()
    try:
        algo.train()
        columns = algo.replay_buffers["default_policy"].columns
        assert columns[sb.OBS].dtype == np.uint8 and columns[sb.NEXT_OBS].dtype == np.uint8
    finally:
        algo.stop()


def test_connector_pieces_on_packed_dict_observations_are_one_clear_line():
    config = dict_config().connectors(env_to_module=[{"name": "frame_stack", "k": 2}])
    with pytest.raises(ConfigError, match=r"Dict/Tuple with image parts"):
        config.build()
    # the implicit mean_std filter is left out for them (the module scales the frames)
    config = dict_config().env_runners(observation_filter="mean_std")
    config.validate()
    runner = EnvRunner(config)
    assert runner.sample()["default_policy"][sb.OBS].dtype == np.uint8


@pytest.mark.slow
def test_ppo_reads_both_the_image_and_the_flag_of_a_dict_observation():
    """The answer is the lit quadrant or its opposite, as the Discrete flag says: >= 7 of 8 needs both parts
    (the image alone scores 4 of 8 at best, the flag alone 2)."""
    algo = dict_config(train_batch_size=512, minibatch_size=128, num_epochs=4, lr=1e-3).build()
    try:
        for _ in range(60):
            result = algo.train()
            if result["episode_return_mean"] >= 2 * 7.5:
                break
        evaluation = algo.evaluate(32, unit="episodes")
    finally:
        algo.stop()
    assert evaluation["evaluation/episode_return_mean"] / 2 >= 7, evaluation["evaluation/episode_return_mean"]


@pytest.mark.parametrize("recurrent", [None, "gru"])
def test_qmix_agents_and_mixer_read_packed_dict_observations(recurrent):
    """Agents encode each part (conv on the frame); the mixer reads the group's packed rows as floats, pixels
    scaled to [0, 1] (what the flattened observation / 255 would be); joint replay stays uint8."""
    model = {"conv_filters": [[8, 4, 2]], "hiddens": [32], "recurrent": recurrent, "max_seq_len": 8}
    algo = dict_config(marl.QMIXConfig, model=model, num_steps_sampled_before_learning_starts=16,
                       min_env_steps_per_iteration=64, train_batch_size=8).build()
    try:
        module = algo.learners.local.module["default_policy"]
        for _ in range(2):
            result = algo.train()
        assert result["counters/learner_updates"] > 0
        columns = algo.replay_buffers["default_policy"].columns
        assert columns[sb.OBS].dtype == np.uint8
        space = algo.runners.local.specs["default_policy"].observation_space
        items = [space.sample() for _ in range(2 * 3)]
        packed = torch.from_numpy(module.parts.pack(items)).reshape(3, -1)  # 3 joint steps of the 2 agents
        flat = np.stack([gym.spaces.flatten(space, o) for o in items]).astype(np.float32)
        image = np.zeros(gym.spaces.flatdim(space), bool)
        image[2: 2 + 16 * 16] = True  # flip (2), image, noise (2): gymnasium's order
        flat[:, image] /= 255.0
        qs = torch.randn(3, 2)
        torch.testing.assert_close(module.mix(qs, packed), module.mixer(qs, torch.from_numpy(flat.reshape(3, -1))))
    finally:
        algo.stop()


def test_recurrent_qmix_scales_a_uint8_frame_state_for_its_mixer():
    from marl.modules.recurrent_q import RecurrentJointQ

    module = RecurrentJointQ(IMAGE, gym.spaces.Discrete(3), {"agent_indices": [0, 1], "recurrent": "gru",
                                                             "conv_filters": [[4, 3, 2]], "hiddens": [8]})
    frames = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (4, 2 * 8 * 8), dtype=np.uint8))
    qs = torch.randn(4, 2)
    torch.testing.assert_close(module.mix(qs, frames), module.mixer(qs, frames.float() / 255.0))
