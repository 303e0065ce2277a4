"""Capabilities: each algorithm's record (action spaces, recurrent, overlap, MIXED, ...) is declared once on its
config class, checked once in validation and printed by `marl reference`."""

from __future__ import annotations

from dataclasses import fields, replace

import gymnasium as gym
import numpy as np
import pytest

import marl
from marl.algorithms import ALGORITHMS
from marl.algorithms.mixed.config import mixable
from marl.algorithms.reference import scenario_reference
from marl.config.capabilities import ANY_SPACE, SPACE_KINDS, Capabilities, check_action_spaces, space_kind
from marl.errors import ConfigError
from marl.policies import PolicySpec
from marl.runners.batched_policy import unsupported
from marl.runners.runner_choice import runner_class


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


# -- declared once (every registered algorithm has its own: tests/test_registry.py) ---------------------
def test_the_records_say_what_the_modules_and_graphs_do():
    caps = {name: cls.capabilities for name, cls in ALGORITHMS.items()}
    for name in ("DQN", "VDN", "QMIX", "PQN", "PQN_VDN"):  # Q networks: one value per discrete action
        assert caps[name].action_spaces == {"Discrete"}, name
    assert caps["TD3"].action_spaces == {"Box"}  # a deterministic actor over tanh actions
    # centralised critics over the joint action: Box, or Discrete one-hots (MADDPG: Gumbel-softmax; MASAC: expectations)
    for name in ("SAC", "CQL", "MASAC", "MADDPG", "HASAC"):
        assert caps[name].action_spaces == {"Discrete", "Box"}, name
    assert {n for n, c in caps.items() if c.self_play} == {"A2C", "MAPPO", "PG", "PPO"}  # synchronous_workflow's snapshots
    assert {n for n, c in caps.items() if c.overlap} == {"A2C", "DQN", "MAPPO", "PG", "PPO", "QMIX", "VDN"}
    assert {n: c.mixed_family for n, c in caps.items() if c.mixed_family} == {
        "A2C": "on_policy", "MAPPO": "on_policy", "PG": "on_policy", "PPO": "on_policy",
        "DQN": "replay", "SAC": "replay", "TD3": "replay"}
    assert sorted(mixable()) == sorted(n for n, c in caps.items() if c.mixed_family)


def test_a_record_names_only_known_kinds_and_families():
    good = dict(action_spaces=ANY_SPACE, recurrent=True, overlap=True, mixed_family=None)
    with pytest.raises(ValueError, match="action_spaces"):
        Capabilities(**{**good, "action_spaces": frozenset({"MultiBinary"})})
    with pytest.raises(ValueError, match="mixed_family is 'offline'"):
        Capabilities(**{**good, "mixed_family": "offline"})
    assert set(SPACE_KINDS) == {"Discrete", "MultiDiscrete", "Box"}
    assert space_kind(gym.spaces.MultiDiscrete([2, 3])) == "MultiDiscrete" and space_kind(gym.spaces.MultiBinary(2)) == "MultiBinary"


def test_every_capability_flag_is_read_by_a_check():
    """Each field of the record gates a check (the fields that only printed a table are gone): a config asking for
    what the record refuses is one line."""
    assert [f.name for f in fields(Capabilities)] == ["action_spaces", "recurrent", "overlap", "mixed_family", "self_play",
                                                      "batched", "note"]
    with pytest.raises(ConfigError, match=r"^'multi_agent.self_play' needs a graph that snapshots the trained policy .*"
                                          r"DQN's does not.*\(algorithms whose graph does: A2C, MAPPO, PG, PPO\)$"):
        marl.DQNConfig().environment("pettingzoo.classic.tictactoe_v3").multi_agent(
            policies={"main": {}}, self_play={"policy": "main"}).validate()
    with pytest.raises(ConfigError, match=r"^'multi_agent.league' needs a graph that snapshots"):
        marl.APPOConfig().environment("pettingzoo.classic.tictactoe_v3").multi_agent(
            policies={"main": {}}, league={"policy": "main"}).validate()
    marl.PPOConfig().environment("pettingzoo.classic.tictactoe_v3").multi_agent(
        policies={"main": {}}, self_play={"policy": "main"}).validate()  # PPO's graph snapshots: accepted
    # (action_spaces, recurrent, overlap, mixed_family and batched: the tests below and in test_mixed.py)


def test_the_old_mixed_family_attribute_is_refused_where_it_went():
    with pytest.raises(TypeError, match="declare capabilities = Capabilities"):
        type("OldStyle", (marl.PPOConfig,), {"algo_name": "OLD", "mixed_family": "on_policy"})


# -- checked once -------------------------------------------------------------------------------
def test_an_action_space_the_algorithm_does_not_act_in_is_one_line_at_build():
    with pytest.raises(ConfigError) as err:
        marl.DQNConfig().environment("Pendulum-v1").build()
    text = one_line(err)
    assert text.startswith("DQN acts in Discrete action spaces; policy 'default_policy' has Box(")
    assert "algorithms for Box: " in text and "SAC" in text and "DQN," not in text
    with pytest.raises(ConfigError, match=r"^TD3 acts in Box action spaces; policy 'default_policy' has Discrete\(2\)"):
        marl.TD3Config().environment("CartPole-v1").build()


@pytest.mark.parametrize("algo", ["VDN", "QMIX", "MASAC", "MADDPG"])
def test_joint_step_learning_on_a_turn_based_env_is_one_line_at_build(algo):
    # Found by `marl train --algo QMIX --env pettingzoo.classic.tictactoe_v3`: a traceback from the first store
    with pytest.raises(ConfigError) as err:
        getattr(marl, f"{algo}Config")().environment("pettingzoo.classic.tictactoe_v3").build()
    text = one_line(err)
    assert text.startswith(f"{algo} learns policy 'default_policy' from joint steps of its agents [0, 1]"), text
    assert "is turn-based" in text and "PPO" in text


def test_joint_step_learning_with_a_policy_per_player_builds_on_a_turn_based_env():
    algo = (marl.VDNConfig().environment("pettingzoo.classic.tictactoe_v3")
            .multi_agent(policies={"p1": {}, "p2": {}}, policy_mapping_fn={"player_1": "p1", "player_2": "p2"}).build())
    algo.stop()  # each group one player: nothing joint to refuse


def test_each_policy_of_a_mixed_run_is_checked_against_its_own_algorithm():
    cfg = marl.MixedConfig().environment("CartPole-v1").multi_agent(policies={"p": {}}, policy_mapping_fn={"*": "p"})
    cfg.training(algorithms={"p": {"algo": "TD3"}})
    specs = {"p": PolicySpec(None, {}, gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))}
    with pytest.raises(ConfigError, match=r"^TD3 acts in Box action spaces; policy 'p' has Discrete\(2\)"):
        check_action_spaces(cfg, specs)
    cfg.training(algorithms={"p": {"algo": "PPO"}})
    check_action_spaces(cfg, specs)  # PPO acts in every kind


@pytest.mark.parametrize("algo", [marl.SACConfig, marl.CQLConfig])
def test_a_recurrent_model_on_an_algorithm_without_recurrent_training_is_one_line(algo):
    # (CQL before its record: a traceback from the recurrent Q network at the first update)
    cfg = algo().environment("CartPole-v1").training(model={"recurrent": "lstm"})
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    name = algo.algo_name
    assert one_line(err).startswith(f"'training.model.recurrent: lstm' (policy 'default_policy'): {name} does not train recurrent models")
    assert "PPO" in str(err.value) and f"{name}," not in str(err.value)
    own = algo().environment("CartPole-v1").multi_agent(policies={"p": {"model": {"recurrent": "gru"}}}, policy_mapping_fn={"*": "p"})
    with pytest.raises(ConfigError, match=r"^'multi_agent.policies.p.model.recurrent: gru' \(policy 'p'\)"):
        own.validate()


@pytest.mark.parametrize("algo", [marl.SACConfig, marl.BCConfig, marl.IMPALAConfig, marl.MixedConfig])
def test_overlap_on_an_algorithm_whose_graph_does_not_overlap_is_one_line(algo):
    cfg = algo().environment("CartPole-v1").env_runners(num_env_runners=1, overlap=True)
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    text = one_line(err)
    assert text.startswith(f"'env_runners.overlap' is not supported by {algo.algo_name}")
    assert "set it to false" in text and "PPO" in text and "DQN" in text


def test_overlap_stays_accepted_where_the_graph_overlaps():
    for algo in (marl.PPOConfig, marl.DQNConfig, marl.A2CConfig):
        algo().environment("CartPole-v1").env_runners(num_env_runners=1, overlap=True).validate()


class UnbatchedPPOConfig(marl.PPOConfig):
    """PPO whose record says its runners cannot be batched: what the batched path's `unsupported` reads."""

    algo_name = "UNBATCHED"
    capabilities = replace(marl.PPOConfig.capabilities, batched=False)


def test_the_batched_path_reads_the_record():
    env = ("vmas.balance", {"max_steps": 5})
    assert unsupported(marl.PPOConfig().environment(env[0], env_config=env[1])) is None
    cfg = UnbatchedPPOConfig().environment(env[0], env_config=env[1])
    assert unsupported(cfg) == "policy 'default_policy': UNBATCHED (its capabilities: batched false)"
    assert runner_class(cfg).__name__ == "VectorEnvRunner"  # auto: the dict path
    with pytest.raises(ConfigError, match="batched path does not run policy 'default_policy': UNBATCHED"):
        runner_class(cfg.env_runners(batched=True))


# -- printed ----------------------------------------------------------------------------------
def test_reference_prints_each_named_algorithms_capabilities():
    text = scenario_reference(["DQN", "MASAC", "MIXED"])
    assert "## Capabilities" in text
    assert "| DQN | Discrete | yes | yes | replay | no | yes |" in text
    assert "| MASAC | Discrete, Box | no | no | no | no | yes |" in text
    assert "- MIXED: each policy is checked against its own algorithm's record" in text
    assert "| PPO |" not in text
    header = next(line for line in text.splitlines() if line.startswith("| algorithm |"))
    assert header.count("|") == len(fields(Capabilities)) + 1  # one column per fact (the note goes below)
    shared = scenario_reference()  # docs/scenario_reference.md: no table to regenerate when a folder is added
    assert "## Capabilities" not in shared and "its capabilities" in shared
