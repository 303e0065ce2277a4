"""Envs made with either action kind (VMAS, PettingZoo's MPE and Pistonball, JaxMARL's MPE, LunarLander) are made
with the kind the algorithm acts in, where the user's env_config leaves the choice open."""

from __future__ import annotations

import pytest
import yaml

import marl
from marl.cli import main as cli_main
from marl.envs.action_kinds import ActionKindKey, action_kind_key
from marl.errors import ConfigError


def test_the_key_of_each_family_that_offers_both_kinds():
    boolean = ActionKindKey("continuous_actions", True, False)
    assert action_kind_key("vmas.navigation") == boolean
    assert action_kind_key("mpe2.simple_spread_v3") == boolean  # its raw_env's parameter
    assert action_kind_key("pettingzoo.butterfly.pistonball_v6") == ActionKindKey("continuous", True, False)
    assert action_kind_key("LunarLander-v3") == ActionKindKey("continuous", True, False)  # a Gymnasium entry point's
    assert action_kind_key("jaxmarl.MPE_simple_spread_v3") == ActionKindKey("action_type", "Continuous", "Discrete")
    for one_kind in ("CartPole-v1", "Pendulum-v1", "jaxmarl.SMAX", "openspiel.kuhn_poker", "no_such_env"):
        assert action_kind_key(one_kind) is None, one_kind


def test_a_discrete_algorithm_on_vmas_gets_its_discrete_actions_and_trains():
    cfg = (marl.QMIXConfig().environment("vmas.navigation", env_config={"max_steps": 20})
           .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=20).debugging(seed=0))
    built = cfg.resolved()
    assert built.environment_cfg.env_config == {"max_steps": 20, "continuous_actions": False}
    assert cfg.environment_cfg.env_config == {"max_steps": 20}  # (the user's config is left as it was)
    algo = cfg.build()
    try:
        result = algo.train()
        assert result["env_steps_total"] >= 80
    finally:
        algo.stop()


def test_a_box_algorithm_on_pettingzoo_mpe_gets_its_box_actions():
    built = marl.TD3Config().environment("mpe2.simple_spread_v3").resolved()
    assert built.environment_cfg.env_config == {"continuous_actions": True}
    assert built.env_spec().acts_in_box


@pytest.mark.parametrize("algo,env", [("PPO", "vmas.navigation"), ("PPO", "mpe2.simple_spread_v3"),
                                      ("SAC", "LunarLander-v3"), ("DQN", "CartPole-v1")])
def test_an_algorithm_acting_in_the_envs_own_kind_leaves_env_config_alone(algo, env):
    built = getattr(marl, f"{algo}Config")().environment(env).resolved()
    assert built.environment_cfg.env_config == {}


def test_a_kind_the_user_set_is_kept_and_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^QMIX acts in Discrete action spaces; policy 'default_policy' has Box\("):
        marl.QMIXConfig().environment("vmas.navigation", env_config={"continuous_actions": True}).build()


def test_config_yaml_records_the_kind_the_run_was_made_with(tmp_path):
    run = tmp_path / "run"
    assert cli_main(["train", "--algo", "QMIX", "--env", "vmas.navigation", "--output", str(run), "--quiet",
                     "stop.iterations=1", "environment.env_config.max_steps=20",
                     "env_runners.num_envs_per_env_runner=4", "env_runners.rollout_fragment_length=20"]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["environment"]["env_config"] == {"max_steps": 20, "continuous_actions": False}
