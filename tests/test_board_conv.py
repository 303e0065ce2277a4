"""Integer-coded boards (a Box of 3 axes that is no image, e.g. Connect Four's 6x7x2 int8 planes): read flat by
default, by a conv stack where `model.conv_filters` asks for it (`marl.modules.catalog.reads_with_conv`)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.modules import QMLP, ActorCriticMLP
from marl.modules.actor_q import ActorQModule, Encoded
from marl.modules.catalog import ConvEncoder, FlatEncoder, encoder_for
from marl.runners import EnvRunner

BOARD = gym.spaces.Dict({"observation": gym.spaces.Box(0, 1, (6, 7, 2), np.int8),
                         "action_mask": gym.spaces.Box(0, 1, (7,), np.int8)})  # connect_four_v3's space
FILTERS = [[8, 4, 1], [8, 2, 1]]


def connect_four(model: dict | None = None):
    return (marl.PPOConfig().environment("pettingzoo.classic.connect_four_v3")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
            .training(train_batch_size=128, minibatch_size=64, num_epochs=1, model=model or {}).debugging(seed=3))


def test_a_board_is_read_flat_by_default_and_by_a_conv_stack_with_conv_filters(caplog):
    with caplog.at_level("WARNING", logger="marl.modules.catalog"):
        flat = encoder_for(BOARD, {"hiddens": [64]})
        conv = encoder_for(BOARD, {"conv_filters": FILTERS})
    assert isinstance(flat, FlatEncoder) and flat.out_dim == 84  # the default: as before
    assert isinstance(conv, ConvEncoder) and conv.layout == "HWC" and conv.convs[0].in_channels == 2
    assert conv.out_dim == 8 * 2 * 3  # valid padding: 6x7 -> 3x4 -> 2x3
    assert not [r for r in caplog.records if "conv_filters" in r.getMessage()]  # used: no "goes unused" line
    # The board travels as a flat float32 row (gymnasium's flatten order); read as HWC planes of 0/1, not scaled by 1/255
    boards = torch.from_numpy(np.random.default_rng(0).integers(0, 2, (5, 6, 7, 2)).astype(np.float32))
    by_hand = conv.convs(boards.permute(0, 3, 1, 2)).flatten(1)
    torch.testing.assert_close(conv(boards.reshape(5, -1)), by_hand)
    assert not torch.allclose(conv(boards.reshape(5, -1)), conv.convs(boards.permute(0, 3, 1, 2) / 255.0).flatten(1))


def test_the_default_modules_build_a_conv_over_a_board_only_when_asked():
    assert ActorCriticMLP(BOARD, gym.spaces.Discrete(7), {}).numpy_actor() is not None  # default: the NumPy MLP pass
    module = ActorCriticMLP(BOARD, gym.spaces.Discrete(7), {"conv_filters": FILTERS, "hiddens": [32]})
    assert isinstance(module.encoder, ConvEncoder) and module.pi[0].in_features == 48
    assert module.numpy_actor() is None  # a conv has no NumPy twin: its runners act in torch (the module's own pass)
    rows = torch.from_numpy(np.random.default_rng(1).integers(0, 2, (4, 84)).astype(np.float32))
    mask = torch.zeros(4, 7)
    mask[:, 3] = 1.0
    out = module.forward_exploration({"obs": rows, "action_mask": mask})
    assert out["action_dist_inputs"].argmax(-1).eq(3).all() and out["vf_preds"].shape == (4,)
    q = QMLP(BOARD, gym.spaces.Discrete(7), {"conv_filters": FILTERS})
    assert isinstance(q.encoder, ConvEncoder) and q.forward_train({"obs": rows})["q_values"].shape == (4, 7)
    sac = ActorQModule(BOARD, gym.spaces.Discrete(7), {"conv_filters": FILTERS, "hiddens": [32]})
    assert all(isinstance(net, Encoded) for net in [*sac.actors, *sac.critics]) and sac.obs_rank == 1
    assert sac.forward_exploration({"obs": rows, "action_mask": mask})["action_dist_inputs"].shape == (4, 7)
    assert isinstance(ActorQModule(BOARD, gym.spaces.Discrete(7), {}).actors[0], torch.nn.Sequential)  # flat MLP as before


def test_ppo_trains_on_connect_four_with_a_conv_over_the_board():
    cfg = connect_four({"conv_filters": FILTERS, "hiddens": [32]})
    algo = cfg.build()
    try:
        module = algo.learners.local.module["default_policy"]
        assert isinstance(module.encoder, ConvEncoder)
        before = [p.detach().clone() for p in module.encoder.parameters()]
        result = algo.train()
        assert result["env_steps_total"] >= 128
        assert any(not torch.equal(a, b) for a, b in zip(before, module.encoder.parameters()))  # the conv learned
    finally:
        algo.stop()
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    batch = runner.sample()["default_policy"]
    assert batch[sb.OBS].dtype == np.float32 and batch[sb.OBS].shape[1] == 84  # the board travels flat, as before
    assert isinstance(runner.module["default_policy"].encoder, ConvEncoder) and not runner.numpy_actors
    runner.stop()


@pytest.mark.parametrize("filters", [[[8, 7, 1]], [[8, 4, 1], [8, 4, 1]], [[8, 3, 4], [8, 2, 1]]])
def test_a_board_too_small_for_the_filters_is_one_config_error(filters):
    with pytest.raises(ConfigError, match="conv_filters") as err:
        connect_four({"conv_filters": filters}).build()
    assert "leaves nothing of the (6, 7, 2) observation" in str(err.value) and "\n" not in str(err.value)
