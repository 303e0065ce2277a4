"""Tests for the config layer: sections, the AlgorithmConfig builder, scenario files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import marl
from marl.algorithms import ALGORITHMS, ConfigError, PPOConfig, config_from_dict, load_scenario
from marl.config.compose import compose
from marl.policies import DEFAULT_POLICY_ID, MappingError

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


# -- builder -----------------------------------------------------------------------


def test_builder_methods_chain_and_set_values():
    cfg = (
        PPOConfig()
        .environment("mpe2.simple_spread_v3", env_config={"N": 2})
        .env_runners(num_envs_per_env_runner=4, observation_filter="mean_std")
        .training(lr=1e-4, gamma=0.95, model={"hiddens": [32]})
        .learners(num_threads=2)
        .debugging(seed=7)
        .evaluation(evaluation_interval=3)
        .stopping(iterations=5)
        .multi_agent(policies=["a", "b"], policy_mapping_fn={"*": "a"}, policies_to_train=["a"])
    )
    assert isinstance(cfg, PPOConfig)
    assert cfg.training_cfg.lr == 1e-4
    assert cfg.training_cfg.gamma == 0.95
    assert cfg.training_cfg.model == {"hiddens": [32]}
    assert cfg.environment_cfg.env == "mpe2.simple_spread_v3"
    assert cfg.environment_cfg.env_config == {"N": 2}
    assert cfg.env_runners_cfg.num_envs_per_env_runner == 4
    assert cfg.env_runners_cfg.observation_filter == "mean_std"
    assert cfg.learners_cfg.num_threads == 2
    assert cfg.debugging_cfg.seed == 7
    assert cfg.evaluation_cfg.evaluation_interval == 3
    assert cfg.stop_cfg.iterations == 5
    assert cfg.multi_agent_cfg.policies == {"a": None, "b": None}
    assert cfg.multi_agent_cfg.policies_to_train == ["a"]
    assert cfg.policy_mapping()("anyone") == "a"
    assert cfg.trained_policy_ids(["a", "b"]) == ["a"]
    # untouched values keep their defaults
    assert cfg.training_cfg.train_batch_size == 4096


def test_builder_single_line_and_int_coerced_to_float():
    assert PPOConfig().training(lr=1e-4).training_cfg.lr == 1e-4
    cfg = PPOConfig().training(lr=1)
    assert cfg.training_cfg.lr == 1.0 and isinstance(cfg.training_cfg.lr, float)


def test_copy_is_deep():
    a = PPOConfig().training(model={"hiddens": [8]})
    b = a.copy()
    b.training_cfg.model["hiddens"].append(9)
    assert a.training_cfg.model == {"hiddens": [8]}


def test_unknown_key_suggests_nearest():
    with pytest.raises(ConfigError) as info:
        PPOConfig().training(lrr=1)
    msg = str(info.value)
    assert "lrr" in msg
    assert "did you mean 'lr'" in msg
    assert isinstance(info.value, ValueError)
    assert marl.ConfigError is ConfigError


def test_wrong_type_rejected():
    with pytest.raises(ConfigError, match="train_batch_size") as info:
        PPOConfig().training(train_batch_size="big")
    assert "int" in str(info.value) and "big" in str(info.value)
    with pytest.raises(ConfigError, match="train_batch_size"):
        PPOConfig().training(train_batch_size=2.5)
    with pytest.raises(ConfigError, match="standardize_advantages"):
        PPOConfig().training(standardize_advantages="yes")
    # bool is not an int
    with pytest.raises(ConfigError, match="num_epochs"):
        PPOConfig().training(num_epochs=True)


def test_out_of_range_rejected():
    with pytest.raises(ConfigError, match="num_envs_per_env_runner") as info:
        PPOConfig().env_runners(num_envs_per_env_runner=0)
    assert ">= 1" in str(info.value)
    with pytest.raises(ConfigError, match="gamma"):
        PPOConfig().training(gamma=1.5)
    with pytest.raises(ConfigError, match="lr"):
        PPOConfig().training(lr=-1e-3)
    PPOConfig().env_runners(num_envs_per_env_runner=1)  # the bound itself is fine


def test_bad_choice_rejected():
    with pytest.raises(ConfigError, match="observation_filter") as info:
        PPOConfig().env_runners(observation_filter="zscore")
    assert "mean_std" in str(info.value) and "zscore" in str(info.value)


def test_optional_fields_accept_none():
    cfg = PPOConfig().training(grad_clip=None).debugging(seed=None).evaluation(evaluation_interval=None)
    assert cfg.training_cfg.grad_clip is None
    with pytest.raises(ConfigError, match="evaluation_interval"):
        PPOConfig().evaluation(evaluation_interval=0)


def test_validate_requires_env_and_known_policies_to_train():
    with pytest.raises(ConfigError, match="environment.env"):
        PPOConfig().validate()
    PPOConfig().environment("CartPole-v1").validate()
    with pytest.raises(ConfigError, match="ghost"):
        PPOConfig().environment("CartPole-v1").multi_agent(policies_to_train=["ghost"]).validate()


def test_policy_specs_default_and_model_for():
    cfg = PPOConfig().training(model={"hiddens": [16], "activation": "relu"})
    assert list(cfg.policy_specs()) == [DEFAULT_POLICY_ID]
    cfg.multi_agent(policies={"p": {"model": {"hiddens": [4]}}})
    assert cfg.plan_for("p").model == {"hiddens": [4], "activation": "relu"}
    cfg.multi_agent(policies={"p": {"modle": {}}})
    with pytest.raises(MappingError, match="modle"):
        cfg.policy_specs()


# -- scenario files ------------------------------------------------------------------


def test_scenarios_exist():
    assert len(SCENARIOS) >= 3


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_load_each_scenario(path):
    data = compose(path).data  # the file over the config groups its defaults list names
    data = OmegaConf.to_container(OmegaConf.create(data), resolve="${" in str(data.get("training")))
    cfg = load_scenario(path)
    assert isinstance(cfg, ALGORITHMS[data["algo"].upper()])
    cfg.validate()
    assert cfg.environment_cfg.env == data["environment"]["env"]
    for key, value in data.get("training", {}).items():
        if key == "model":
            for mk, mv in value.items():
                assert cfg.training_cfg.model[mk] == mv
        else:
            assert getattr(cfg.training_cfg, key) == value, key
    for key, value in (data.get("env_runners") or {}).items():
        assert getattr(cfg.env_runners_cfg, key) == value
    # overrides apply on top
    if data["algo"] == "MIXED":  # training keys are per policy: training.algorithms.<policy>.<key>
        pid = next(iter(data["training"]["algorithms"]))
        over = load_scenario(path, [f"training.algorithms.{pid}.lr=0.1", "env_runners.num_envs_per_env_runner=3", "debugging.seed=11"])
        assert over.plan_for(pid).training.lr == 0.1
        assert over.training_cfg.algorithms == {**cfg.training_cfg.algorithms, pid: {**cfg.training_cfg.algorithms[pid], "lr": 0.1}}
        assert over.env_runners_cfg.num_envs_per_env_runner == 3
        return
    over = load_scenario(path, ["training.lr=0.1", "env_runners.num_envs_per_env_runner=3", "debugging.seed=11"])
    assert over.training_cfg.lr == 0.1
    assert over.env_runners_cfg.num_envs_per_env_runner == 3
    assert over.debugging_cfg.seed == 11
    # everything else unchanged, but a batch sized by the worlds (the vmas task family's `mul`) follows them
    raw_batch = str((compose(path).data.get("training") or {}).get("train_batch_size"))
    worlds = cfg.env_runners_cfg.num_envs_per_env_runner
    scaled = cfg.training_cfg.train_batch_size * 3 // worlds if "mul:${env_runners.num_envs" in raw_batch else None
    assert over.training_cfg.train_batch_size == (scaled or cfg.training_cfg.train_batch_size)


def test_simple_tag_scenario_policies():
    cfg = load_scenario(ROOT / "scenarios" / "simple_tag_ppo.yaml")
    assert list(cfg.policy_specs()) == ["predator", "prey"]
    mapping = cfg.policy_mapping()
    assert mapping("adversary_2") == "predator" and mapping("agent_0") == "prey"
    # the task's model (conf/task/mpe/_family.yaml), replacing PPO's `auto` whole
    assert cfg.training_cfg.model == {"hiddens": [128, 128], "activation": "tanh"}


def test_override_with_bad_value_is_rejected():
    with pytest.raises(ConfigError, match="observation_filter"):
        load_scenario(SCENARIOS[0], ["env_runners.observation_filter=zscore"])
    with pytest.raises(ConfigError, match="lrr"):
        load_scenario(SCENARIOS[0], ["training.lrr=0.1"])


def test_malformed_override_rejected():
    with pytest.raises(ConfigError, match="key=value") as info:
        load_scenario(SCENARIOS[0], ["training.lr"])
    assert "training.lr" in str(info.value)


def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def test_unknown_top_level_section_rejected(tmp_path):
    path = _write(tmp_path, "algo: PPO\nenvironment: {env: CartPole-v1}\ntrainig: {lr: 0.1}\n")
    with pytest.raises(ConfigError, match="trainig") as info:
        load_scenario(path)
    assert "did you mean 'training'" in str(info.value)


def test_missing_algo_rejected(tmp_path):
    path = _write(tmp_path, "environment: {env: CartPole-v1}\n")
    with pytest.raises(ConfigError, match="'algo' is required"):
        load_scenario(path)


def test_unknown_algo_rejected_naming_available(tmp_path):
    path = _write(tmp_path, "algo: NOSUCHALGO\nenvironment: {env: CartPole-v1}\n")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    msg = str(info.value)
    assert "NOSUCHALGO" in msg and "PPO" in msg and "SAC" in msg


def test_algo_name_case_insensitive(tmp_path):
    assert isinstance(load_scenario(_write(tmp_path, "algo: ppo\n")), PPOConfig)


def test_section_not_a_mapping_rejected(tmp_path):
    with pytest.raises(ConfigError, match="training"):
        load_scenario(_write(tmp_path, "algo: PPO\ntraining: 3\n"))


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_scenario(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_scenario(_write(tmp_path, "algo: PPO\ntraining: {lr: [\n"))
    with pytest.raises(ConfigError, match="mapping"):
        load_scenario(_write(tmp_path, "- a\n- b\n"))


def test_interpolation_resolves_against_defaults(tmp_path):
    path = _write(tmp_path, "algo: PPO\ntraining:\n  minibatch_size: ${training.train_batch_size}\n")
    cfg = load_scenario(path)
    assert cfg.training_cfg.minibatch_size == 4096


# -- documented defaults and round trip --------------------------------------------


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_conf_yaml_matches_defaults(algo):
    from marl.algorithms.reference import defaults_yaml

    on_file = OmegaConf.to_container(OmegaConf.create(defaults_yaml(algo)))  # what `marl defaults ALGO` prints
    defaults = ALGORITHMS[algo]().to_dict()
    assert on_file["environment"].pop("env") is None
    defaults["environment"].pop("env")
    assert on_file == defaults


def test_to_dict_is_plain_data():
    d = PPOConfig().to_dict()
    assert d["algo"] == "PPO"
    assert set(d) == {"algo", "environment", "env_runners", "multi_agent", "training", "learners", "debugging", "evaluation", "stop", "checkpointing", "connectors", "loggers", "offline", "workflow"}
    # survives YAML (OmegaConf) unchanged
    assert OmegaConf.to_container(OmegaConf.create(d)) == d


def test_to_dict_round_trips_through_config_from_dict():
    cfg = (
        PPOConfig()
        .environment("mpe2.simple_tag_v3", env_config={"num_good": 1})
        .env_runners(num_envs_per_env_runner=2, observation_filter="mean_std")
        .multi_agent(
            policies={"predator": {"model": {"hiddens": [8]}}, "prey": None},
            policy_mapping_fn={"adversary_*": "predator", "*": "prey"},
        )
        .training(lr=1e-3, grad_clip=None, model={"hiddens": [32, 32], "activation": "relu"})
        .debugging(seed=3)
        .stopping(iterations=2)
    )
    d = cfg.to_dict()
    again = config_from_dict(d)
    assert isinstance(again, PPOConfig)
    assert again.to_dict() == d
    assert again.training_cfg.lr == 1e-3
    assert again.training_cfg.grad_clip is None
    assert again.policy_mapping()("adversary_1") == "predator"
    assert again.plan_for("predator").model == {"hiddens": [8], "activation": "relu"}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_round_trip(path):
    cfg = load_scenario(path)
    assert config_from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()


def test_class_module_class_becomes_import_path():
    from marl.modules import ActorCriticMLP

    cfg = PPOConfig().multi_agent(policies={"p": {"module_class": ActorCriticMLP}})
    d = cfg.to_dict()
    assert d["multi_agent"]["policies"]["p"]["module_class"] == "marl.modules.mlp:ActorCriticMLP"
    again = config_from_dict(d)
    assert again.policy_specs()["p"].module_class == "marl.modules.mlp:ActorCriticMLP"


def test_partial_model_dict_round_trips():
    cfg = PPOConfig().training(model={"hiddens": [32]})
    d = cfg.to_dict()
    assert config_from_dict(d).to_dict() == d


def test_a_config_that_overrides_a_read_of_the_plan_is_refused():
    """`plan_for` and `runner_columns` read `_plan(pid)`; callers read the plan, so an override would be bypassed."""
    with pytest.raises(TypeError, match=r"overrides \[.runner_columns.\].*override _plan\(policy_id\)"):
        type("OldStyle", (PPOConfig,), {"runner_columns": lambda self, policy_id: frozenset()})
    plan = PPOConfig().training(model={"hiddens": [4]}).plan_for("default_policy")
    assert plan.model == {"hiddens": [4]} and plan.burn_in == 0 and plan.replay is None and plan.unsquash_actions is False


@pytest.mark.parametrize("override", ["multi_agent.policies=[a]", "multi_agent=[1]"])
def test_an_override_of_another_kind_than_the_scenarios_value_is_one_line_naming_it(override):
    data = {"algo": "PPO", "environment": {"env": "CartPole-v1"}, "multi_agent": {"policies": {"a": {}}}}
    with pytest.raises(ConfigError, match="^" + re.escape(f"override '{override}': a list or mapping where the scenario holds the other")):
        config_from_dict(data, [override])
    assert config_from_dict(data, ["training.lr=0.001", "training.lr=0.002"]).training_cfg.lr == 0.002  # last one wins
