"""SAC, TD3, MASAC and MADDPG on image observations: each actor and critic reads frames through a conv encoder
of its own, uint8 from the runner through replay to the encoder (`marl.modules.actor_q.Encoded`)."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.modules.actor_q import ActorQModule, Encoded
from marl.modules.catalog import ConvEncoder

IMAGE = gym.spaces.Box(0, 255, (16, 16, 1), np.uint8)
MODEL = {"conv_filters": [[8, 4, 2], [16, 3, 2]], "hiddens": [64]}


def quadrant_sac(**training):
    return (marl.SACConfig().environment("tests.image_envs", env_config={"size": 16})
            .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=8).debugging(seed=0)
            .training(model=MODEL, **training))


def test_discrete_sac_keeps_frames_uint8_into_replay_and_reads_them_through_conv_encoders():
    # 64 env steps an iteration, one 32-row update per 4 of them: the path from runner to encoder is what is checked,
    # not learning (SAC's defaults, 1,000 env steps and a 256-row conv update per env step, took 50 s for 3 iterations).
    algo = quadrant_sac(num_steps_sampled_before_learning_starts=32, min_env_steps_per_iteration=64,
                        train_batch_size=32, training_intensity=8).build()
    try:
        module = algo.learners.local.module["default_policy"]
        assert all(isinstance(n, Encoded) and isinstance(n.encoder, ConvEncoder) for n in [*module.actors, *module.critics])
        assert module.actors[0].encoder is not module.critics[0].encoder  # each network its own encoder
        for _ in range(3):
            result = algo.train()
        assert result["counters/learner_updates"] > 0
        columns = algo.replay_buffers["default_policy"].columns
        assert columns[sb.OBS].dtype == np.uint8 and columns[sb.OBS].shape[1:] == (16, 16, 1)
        losses = [v for k, v in result.items() if k.startswith("losses/")]
        assert losses and np.all(np.isfinite(losses))
        frames = torch.from_numpy(np.full((3, 16, 16, 1), 255, np.uint8))
        acted = module.forward_inference({"obs": frames})["action_dist_inputs"]
        learned = module.group_actor(frames.unsqueeze(1))[:, 0]  # the learner's pass over [B, 1, *image]
        torch.testing.assert_close(acted, learned)
    finally:
        algo.stop()


@pytest.mark.parametrize("deterministic", [False, True])
def test_centralised_critics_encode_each_agents_frame_and_targets_copy_their_encoders(deterministic):
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    module = ActorQModule(IMAGE, box, {**MODEL, "agent_indices": [0, 1, 2], "deterministic": deterministic})
    frames = torch.randint(0, 256, (5, 3, 16, 16, 1), dtype=torch.uint8)
    actions = torch.rand(5, 3, 2) * 2 - 1
    qs = module.q_values(frames, actions)
    assert len(qs) == 2 and all(q.shape == (5,) for q in qs)
    assert module.group_actor(frames).shape == (5, 3, 2 if deterministic else 4)
    # one agent's frame moves the joint Q: each frame is read
    other = frames.clone()
    other[:, 2] = 255 - other[:, 2]
    assert not torch.allclose(module.q_values(other, actions)[0], qs[0])
    target = copy.deepcopy(module.critics)  # what the learner keeps: encoders travel with their critics
    torch.testing.assert_close(module.q_values(frames, actions, target)[0], qs[0])
    with torch.no_grad():
        module.critics[0].encoder.convs[0].weight.add_(0.1)
    assert not torch.allclose(module.q_values(frames, actions)[0], module.q_values(frames, actions, target)[0])


def test_flat_observations_keep_the_plain_mlps_and_their_parameter_names():
    """Checkpoints of SAC on flat observations, written before images were read, name the same parameters."""
    flat = gym.spaces.Box(-1.0, 1.0, (6,), np.float32)
    module = ActorQModule(flat, gym.spaces.Discrete(3), {"hiddens": [32]})
    names = set(module.state_dict())
    assert {"actors.0.0.weight", "critics.0.0.weight", "critics.1.0.weight"} <= names
    assert not any(isinstance(n, Encoded) for n in [*module.actors, *module.critics])


@pytest.mark.slow
def test_discrete_sac_with_a_cnn_learns_to_read_the_image():
    """Chance earns 2 of 8 per episode and agent; reading the lit quadrant from the pixels earns 8.
    Mutant checked: lr=0 stays near 2."""
    algo = quadrant_sac(lr=1e-3, train_batch_size=64, training_intensity=2,
                        num_steps_sampled_before_learning_starts=256).build()
    try:
        best = 0.0
        for _ in range(60):
            result = algo.train()
            ret = result["episode_return_mean"]
            best = max(best, ret / 2) if ret == ret else best  # two agents: per-agent return
            if best >= 6.0:
                break
        assert best >= 6.0, best
    finally:
        algo.stop()
