"""PPO's `auto` training keys: set by the env's action space when the config builds, never over a value given."""

from __future__ import annotations

import pytest

from marl.algorithms import ConfigError, config_from_dict
from marl.algorithms.ppo.action_space_defaults import BOX, DISCRETE


def _training(env: str, **given):
    return config_from_dict({"algo": "PPO", "environment": {"env": env}, "training": given}).resolved().training_cfg


def _values(training, keys):
    return {k: getattr(training, k) for k in keys}


def test_box_actions_get_the_box_values_and_discrete_ones_the_discrete_values():
    assert BOX.keys() == DISCRETE.keys()
    assert _values(_training("Pendulum-v1"), BOX) == BOX
    assert _values(_training("CartPole-v1"), DISCRETE) == DISCRETE
    # every agent of the env decides: two Pendulum copies are Box, two CartPole copies discrete
    assert _values(_training("copies.Pendulum-v1"), BOX) == BOX
    assert _values(_training("copies.CartPole-v1"), DISCRETE) == DISCRETE


def test_a_value_given_is_kept_even_where_it_equals_the_other_kinds_default():
    given = _training("Pendulum-v1", gae_lambda=0.95, grad_clip=0.5, model={"hiddens": [32]})
    assert (given.gae_lambda, given.grad_clip, given.model) == (0.95, 0.5, {"hiddens": [32]})
    assert given.num_epochs == BOX["num_epochs"]  # the keys not given still follow the action space
    unclipped = _training("CartPole-v1", grad_clip=None)
    assert unclipped.grad_clip is None and unclipped.gae_lambda == DISCRETE["gae_lambda"]


def test_the_unbuilt_config_says_auto_and_building_does_not_change_it():
    from marl import PPOConfig

    config = PPOConfig().environment("Pendulum-v1")
    assert config.training_cfg.gae_lambda == "auto" and config.to_dict()["training"]["model"] == "auto"
    resolved = config.resolved()
    assert resolved.training_cfg.gae_lambda == BOX["gae_lambda"] and config.training_cfg.gae_lambda == "auto"
    config.validate()  # `auto` passes the relation checks (minibatch_size <= train_batch_size) and the plan's model
    again = config_from_dict(resolved.to_dict())  # a run's config.yaml holds the resolved values
    assert _values(again.training_cfg, BOX) == BOX


@pytest.mark.parametrize("key, value, message", [
    ("gae_lambda", "atuo", "'training.gae_lambda' must be float"),
    ("gae_lambda", 1.5, "'training.gae_lambda' must be <= 1"),
    ("num_epochs", 0, "'training.num_epochs' must be >= 1"),
])
def test_a_bad_value_is_one_line_naming_the_key(key, value, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"algo": "PPO", "environment": {"env": "Pendulum-v1"}, "training": {key: value}})


def test_mappo_keeps_one_set_and_mixed_resolves_its_ppo_policies():
    from marl import MAPPOConfig

    mappo = MAPPOConfig().training_cfg
    assert not [k for k in BOX if getattr(mappo, k) == "auto"]  # MAPPO's values do not follow the action space
    mixed = config_from_dict({"algo": "MIXED", "environment": {"env": "Pendulum-v1"},
                              "training": {"algorithms": {"default_policy": {"algo": "PPO", "num_epochs": 3}}}})
    sub = mixed.sub_config("default_policy").training_cfg
    assert sub.num_epochs == 3 and _values(sub, ["gae_lambda", "model"]) == _values(_training("Pendulum-v1"), ["gae_lambda", "model"])
