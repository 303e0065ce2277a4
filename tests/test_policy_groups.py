"""With no policies declared, agents that differ in their spaces get one policy per group of alike agents (as
BenchMARL groups them), rather than a 'default_policy' that cannot serve them all."""

from __future__ import annotations

import gymnasium as gym
import pytest

import marl
from marl.policies import MappingError
from marl.policies.groups import agent_groups, group_mapping

SMALL, LARGE = gym.spaces.Box(-1, 1, (14,)), gym.spaces.Box(-1, 1, (16,))
MOVE = gym.spaces.Discrete(5)


def spaces_of(table):
    return lambda agent: table[agent]


def test_alike_agents_share_one_policy():
    assert agent_groups(["agent_0", "agent_1"], spaces_of({"agent_0": (SMALL, MOVE), "agent_1": (SMALL, MOVE)})) is None


def test_agents_are_grouped_by_name_where_names_separate_the_kinds():
    table = {"adversary_0": (LARGE, MOVE), "adversary_1": (LARGE, MOVE), "agent_0": (SMALL, MOVE)}
    groups = agent_groups(list(table), spaces_of(table))
    assert groups == {"adversary": ["adversary_0", "adversary_1"], "agent": ["agent_0"]}
    assert group_mapping(groups) == {"adversary_*": "adversary", "agent_*": "agent"}


def test_agents_are_grouped_by_spaces_where_names_do_not_separate_the_kinds():
    table = {"robot_0": (LARGE, MOVE), "robot_1": (SMALL, MOVE), "robot_2": (LARGE, MOVE)}
    groups = agent_groups(list(table), spaces_of(table))
    assert groups == {"group_0": ["robot_0", "robot_2"], "group_1": ["robot_1"]}
    assert group_mapping(groups) == {"robot_0": "group_0", "robot_2": "group_0", "robot_1": "group_1"}


def test_a_pattern_that_would_catch_another_groups_agents_is_spelled_out():
    # 'agent_*' would also match agent_red_0: that group is mapped agent by agent
    table = {"agent_0": (SMALL, MOVE), "agent_red_0": (LARGE, MOVE), "agent_red_1": (LARGE, MOVE)}
    groups = agent_groups(list(table), spaces_of(table))
    assert groups == {"agent": ["agent_0"], "agent_red": ["agent_red_0", "agent_red_1"]}
    mapping = group_mapping(groups)
    assert mapping == {"agent_0": "agent", "agent_red_*": "agent_red"}
    policy = marl.PPOConfig().multi_agent(policies=list(groups), policy_mapping_fn=mapping).policy_mapping()
    assert [policy(a) for a in table] == ["agent", "agent_red", "agent_red"]


def test_pettingzoo_simple_tag_trains_a_policy_per_group_and_records_them():
    cfg = (marl.PPOConfig().environment("mpe2.simple_tag_v3", env_config={"max_cycles": 10})
           .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=20)
           .training(train_batch_size=80, minibatch_size=40, num_epochs=1).debugging(seed=0))
    assert list(cfg.policy_specs()) == ["adversary", "agent"]  # (before the build too: validate sees them)
    built = cfg.resolved()
    assert built.multi_agent_cfg.policies == {"adversary": {}, "agent": {}}
    assert built.multi_agent_cfg.policy_mapping == {"adversary_*": "adversary", "agent_*": "agent"}
    assert cfg.multi_agent_cfg.policies == {} and cfg.multi_agent_cfg.policy_mapping is None  # the user's, as given
    algo = cfg.build()
    try:
        result = algo.train()
        assert set(algo.agents_of) == {"adversary", "agent"}
        assert algo.agents_of["adversary"] == ["adversary_0", "adversary_1", "adversary_2"]
        assert result["env_steps_total"] >= 20
    finally:
        algo.stop()


@pytest.mark.parametrize("declared", [
    {"policies": ["default_policy"]},  # a policy declared: the user's (and the shared-space check) stand
    {"policy_mapping_fn": {"*": "default_policy"}},
])
def test_declared_policies_or_mappings_are_left_alone(declared):
    cfg = marl.PPOConfig().environment("mpe2.simple_tag_v3").multi_agent(**declared)
    assert list(cfg.policy_specs()) == ["default_policy"]
    with pytest.raises(MappingError, match="shared by agents with different observation spaces"):
        cfg.build()


def test_alike_agents_keep_the_default_policy():
    assert list(marl.PPOConfig().environment("mpe2.simple_spread_v3").resolved().policy_specs()) == ["default_policy"]
