"""Large image observations by default (`environment.wrappers: auto`, PPO's IMAGE `auto` values): frames with a
side over 84 px are resized to 42x42 by SuperSuit, the conv stack is the one sized for that, PPO trains them
with 3 epochs of 256-row minibatches; flat and small-image envs, and every list given, are as before."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.algorithms import ConfigError, config_from_dict
from marl.algorithms.ppo.action_space_defaults import BOX, DISCRETE, IMAGE
from marl.envs import make_env
from marl.envs.wrappers import image_wrappers
from marl.modules.catalog import ConvEncoder
from marl.runners import EnvRunner

PISTONBALL = "pettingzoo.butterfly.pistonball_v6"
RESIZE = [{"resize_v1": {"x_size": 42, "y_size": 42}}]
needs_butterfly = pytest.mark.skipif(
    importlib.util.find_spec("supersuit") is None or importlib.util.find_spec("pymunk") is None,
    reason="supersuit/pettingzoo[butterfly] not installed: pip install 'marl[butterfly]'",
)


def _pettingzoo_like(space):
    return SimpleNamespace(possible_agents=["a", "b"], observation_space=lambda agent: space)


@pytest.mark.parametrize("space, wrapped", [
    (gym.spaces.Box(0, 255, (457, 120, 3), np.uint8), True),  # Pistonball's crops
    (gym.spaces.Box(0, 255, (85, 40, 1), np.uint8), True),  # one side over 84 is enough
    (gym.spaces.Box(0, 255, (84, 84, 3), np.uint8), False),  # already Atari-sized: kept
    (gym.spaces.Box(0.0, 1.0, (457, 120, 3), np.float32), False),  # float feature maps are not frames
    (gym.spaces.Box(0, 255, (3, 457, 120), np.uint8), False),  # channels first: SuperSuit resizes HWC only
    (gym.spaces.Box(-1.0, 1.0, (18,), np.float32), False),
])
def test_only_large_uint8_frames_get_the_resize(space, wrapped):
    assert image_wrappers(_pettingzoo_like(space)) == (RESIZE if wrapped else [])
    assert image_wrappers(SimpleNamespace(observation_space=space)) == (RESIZE if wrapped else [])  # a Gymnasium env


def _resolved(env, runners=None, **environment):
    return config_from_dict({"algo": "PPO", "environment": {"env": env, **environment},
                             "env_runners": runners or {}}).resolved()


def _conv_stack(module) -> list[list[int]]:
    return [[c.out_channels, c.kernel_size[0], c.stride[0]] for c in module.encoder.modules() if isinstance(c, torch.nn.Conv2d)]


@needs_butterfly
def test_pistonball_defaults_are_42px_frames_a_sized_conv_stack_and_the_image_values():
    config = _resolved(PISTONBALL, {"num_envs_per_env_runner": 1, "rollout_fragment_length": 4}, env_config={"n_pistons": 4})
    assert config.environment_cfg.wrappers == RESIZE  # written out: config.yaml names what ran
    assert {k: getattr(config.training_cfg, k) for k in IMAGE} == IMAGE
    assert IMAGE.keys() == BOX.keys() == DISCRETE.keys()
    runner = EnvRunner(config, 0)
    try:
        batch = runner.sample()["default_policy"]
        assert batch["obs"].dtype == np.uint8 and batch["obs"].shape[1:] == (42, 42, 3)
        assert isinstance(runner.module["default_policy"].encoder, ConvEncoder)
        assert _conv_stack(runner.module["default_policy"]) == [[16, 4, 2], [32, 4, 2], [32, 3, 1]]  # the 24-63 px stack
    finally:
        runner.close() if hasattr(runner, "close") else None
    again = config_from_dict(config.to_dict()).resolved()  # a run's config.yaml loads to the same env
    assert again.environment_cfg.wrappers == RESIZE


@needs_butterfly
def test_a_list_given_even_empty_replaces_auto():
    full = _resolved(PISTONBALL, env_config={"n_pistons": 4}, wrappers=[])
    assert full.environment_cfg.wrappers == []
    env = make_env(PISTONBALL, {"n_pistons": 4}, full.environment_cfg.wrappers)
    assert env.observation_space("piston_0").shape == (457, 120, 3)  # what runs and checkpoints before auto had
    grey = [{"color_reduction_v0": {"mode": "B"}}, {"resize_v1": {"x_size": 32, "y_size": 32}}]
    assert _resolved(PISTONBALL, env_config={"n_pistons": 4}, wrappers=grey).environment_cfg.wrappers == grey


def test_flat_and_marl_native_envs_get_no_wrapper_and_keep_their_values():
    cartpole = _resolved("CartPole-v1")
    assert cartpole.environment_cfg.wrappers == [] and cartpole.training_cfg.model == DISCRETE["model"]
    assert _resolved("Pendulum-v1").training_cfg.num_epochs == BOX["num_epochs"]
    # a marl MultiAgentEnv is not SuperSuit's to wrap: its 16 px frames stay, and images get the IMAGE values
    quadrant = _resolved("tests.image_envs")
    assert quadrant.environment_cfg.wrappers == [] and quadrant.training_cfg.num_epochs == IMAGE["num_epochs"]
    assert make_env("tests.image_envs", {}, "auto").observation_space("a0").shape == (16, 16, 1)
    assert make_env("copies.CartPole-v1", {"num_agents": 2}, "auto").possible_agents  # auto is no error off SuperSuit


def test_the_old_config_without_auto_loads_as_it_was():
    """A run's config.yaml from before (wrappers: [] written out, training values written out) builds the same."""
    config = config_from_dict(marl.PPOConfig().environment("CartPole-v1").training(
        num_epochs=30, minibatch_size=128, model={"hiddens": [64, 64]}).environment(wrappers=[]).to_dict()).resolved()
    assert config.environment_cfg.wrappers == [] and config.training_cfg.num_epochs == 30


@pytest.mark.parametrize("value, message", [
    ("atuo", r"'environment.wrappers' must be list"),
    (7, r"'environment.wrappers' must be list"),
])
def test_a_bad_wrappers_value_is_one_line(value, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"algo": "PPO", "environment": {"env": "CartPole-v1", "wrappers": value}})


@needs_butterfly
@pytest.mark.slow
def test_one_iteration_of_ppo_defaults_on_full_pistonball_trains_on_42px_frames():
    """`marl train --algo PPO --env pettingzoo.butterfly.pistonball_v6` (20 pistons, Box actions): the frames the
    learner sees are 42x42 uint8, its conv stack is sized to them, one update runs and its losses are finite.
    (A batch of 800 agent steps, not 4,096, keeps this to seconds; time and memory per default iteration, and
    learning: benchmarks/speed/images.py --defaults / --learn.)"""
    algo = (marl.PPOConfig().environment(PISTONBALL).env_runners(num_envs_per_env_runner=2)
            .training(train_batch_size=800).debugging(seed=0).build())
    try:
        assert algo.config.environment_cfg.wrappers == RESIZE
        assert (algo.config.training_cfg.num_epochs, algo.config.training_cfg.minibatch_size) == (3, 256)
        weights = algo.get_weights()["modules"]["default_policy"]
        convs = [tuple(w.shape) for w in weights.values() if getattr(w, "ndim", 0) == 4]
        assert convs == [(16, 3, 4, 4), (32, 16, 4, 4), (32, 32, 3, 3)]  # RGB in, the 24-63 px stack
        # 42 px -> 20 -> 9 -> 7: the heads read 7 x 7 x 32 = 1,568 features (full 457x120 frames: 54,656)
        assert {tuple(w.shape)[1] for w in weights.values() if getattr(w, "ndim", 0) == 2} >= {1568}
        result = algo.train()
        assert result["env_steps_total"] == 40  # 800 agent steps / 20 pistons
        losses = {k: v for k, v in result.items() if k.startswith("losses/default_policy/")}
        assert losses and all(np.isfinite(v) for v in losses.values()), losses
    finally:
        algo.stop()


@needs_butterfly
def test_a_large_state_frame_gives_way_to_the_agents_resized_frames_for_mappos_critic():
    # Found by `marl train --algo MAPPO --env pettingzoo.butterfly.cooperative_pong_v6`: its state() is the
    # 280x480 screen, which the critic read as a 403,202-wide vector (a 52M-parameter first layer).
    from marl.runners.global_state import JOINED_OBS, probe_global_state

    env = make_env("pettingzoo.butterfly.cooperative_pong_v6", {}, RESIZE)
    try:
        env.reset(seed=0)
        assert max(np.asarray(env.state()).shape[:2]) > 84  # the screen at full size, past the resize
        spec = probe_global_state(env)
    finally:
        env.close()
    assert spec["source"] == JOINED_OBS and spec["frame"] == [42, 42, 3] and spec["dtype"] == "uint8", spec
    algo = marl.MAPPOConfig().environment("pettingzoo.butterfly.cooperative_pong_v6").build()
    try:
        critic_in = algo.learners.local.module["default_policy"].vf[0].in_features
        assert critic_in < 5_000, critic_in  # the two frames' conv features and the agent id, not the screen
    finally:
        algo.stop()
