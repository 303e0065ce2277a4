"""Tests for marl.policies.mapping: PolicySpec, PolicyMapping, resolve_policies."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import marl
from marl.policies import DEFAULT_POLICY_ID, MappingError, PolicyMapping, PolicySpec, resolve_policies


@pytest.fixture(scope="module")
def tag_env():
    env = marl.make_env("mpe2.simple_tag_v3")
    yield env
    close = getattr(env, "close", None)
    if close is not None:
        close()


# -- PolicyMapping ---------------------------------------------------------------


def test_glob_table_first_match_wins():
    m = PolicyMapping({"adversary_0": "boss", "adversary_*": "predator", "*": "prey"}, ["boss", "predator", "prey"])
    assert m("adversary_0") == "boss"
    assert m("adversary_1") == "predator"
    assert m("agent_0") == "prey"
    # order matters: with the catch-all first, everything is prey
    m2 = PolicyMapping({"*": "prey", "adversary_*": "predator"}, ["predator", "prey"])
    assert m2("adversary_1") == "prey"


def test_glob_is_case_sensitive_and_anchored():
    m = PolicyMapping({"agent_?": "a", "*_x": "b"}, ["a", "b"])
    assert m("agent_1") == "a"
    assert m("q_x") == "b"
    with pytest.raises(MappingError):
        m("agent_10")
    with pytest.raises(MappingError):
        m("Agent_1")


def test_agent_matching_no_pattern_raises_naming_agent():
    m = PolicyMapping({"adversary_*": "predator"}, ["predator", "prey"])
    with pytest.raises(MappingError, match="'agent_0'") as info:
        m("agent_0")
    assert "adversary_*" in str(info.value)


def test_mapping_to_undeclared_policy_raises_naming_agent_and_policy():
    m = PolicyMapping({"*": "ghost"}, ["predator", "prey"])
    with pytest.raises(MappingError) as info:
        m("agent_0")
    msg = str(info.value)
    assert "agent_0" in msg and "ghost" in msg
    assert "predator" in msg  # lists the declared ones


def test_callable_mapping():
    calls = []

    def fn(agent_id, episode):
        calls.append((agent_id, episode))
        return "even" if int(agent_id.split("_")[1]) % 2 == 0 else "odd"

    m = PolicyMapping(fn, ["even", "odd"])
    assert m("agent_0") == "even"
    assert m("agent_3", episode="ep") == "odd"
    assert calls == [("agent_0", None), ("agent_3", "ep")]
    bad = PolicyMapping(lambda a, e: "nope", ["even"])
    with pytest.raises(MappingError, match="nope"):
        bad("agent_0")


def test_no_mapping_single_policy_maps_everyone():
    m = PolicyMapping(None, [DEFAULT_POLICY_ID])
    assert m("anything") == DEFAULT_POLICY_ID


def test_no_mapping_several_policies_maps_by_name():
    m = PolicyMapping(None, ["agent_0", "agent_1"])
    assert m("agent_1") == "agent_1"
    with pytest.raises(MappingError, match="agent_7"):
        m("agent_7")


def test_bad_mapping_type_rejected():
    with pytest.raises(MappingError, match="int"):
        PolicyMapping(42, ["p"])


# -- resolve_policies -----------------------------------------------------------------


def test_resolve_policies_fills_spaces_from_agents(tag_env):
    specs = {"predator": PolicySpec(model={"hiddens": [8]}), "prey": PolicySpec()}
    mapping = PolicyMapping({"adversary_*": "predator", "*": "prey"}, list(specs))
    resolved, agents_of = resolve_policies(tag_env, specs, mapping)
    assert agents_of == {"predator": ["adversary_0", "adversary_1", "adversary_2"], "prey": ["agent_0"]}
    assert resolved["predator"].observation_space.shape == (16,)
    assert resolved["prey"].observation_space.shape == (14,)
    assert resolved["predator"].action_space == gym.spaces.Discrete(5)
    assert resolved["predator"].model == {"hiddens": [8]}
    # the input specs are not modified
    assert specs["predator"].observation_space is None


def test_sharing_policy_across_different_spaces_raises(tag_env):
    specs = {"shared": PolicySpec()}
    mapping = PolicyMapping({"*": "shared"}, ["shared"])
    with pytest.raises(MappingError) as info:
        resolve_policies(tag_env, specs, mapping)
    msg = str(info.value)
    assert "shared" in msg
    assert "agent_0" in msg and "adversary_0" in msg
    assert "(14,)" in msg and "(16,)" in msg


def test_spec_space_conflicting_with_agents_raises(tag_env):
    specs = {"predator": PolicySpec(observation_space=gym.spaces.Box(-1, 1, (3,), np.float32)), "prey": PolicySpec()}
    mapping = PolicyMapping({"adversary_*": "predator", "*": "prey"}, list(specs))
    with pytest.raises(MappingError, match="predator"):
        resolve_policies(tag_env, specs, mapping)


def test_declared_policy_without_agents_raises_naming_it(tag_env):
    specs = {"predator": PolicySpec(), "prey": PolicySpec(), "spectator": PolicySpec()}
    mapping = PolicyMapping({"adversary_*": "predator", "*": "prey"}, list(specs))
    with pytest.raises(MappingError, match="spectator"):
        resolve_policies(tag_env, specs, mapping)


def test_policy_without_agents_but_with_spaces_is_kept(tag_env):
    obs, act = gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2)
    specs = {"predator": PolicySpec(), "prey": PolicySpec(), "spectator": PolicySpec(observation_space=obs, action_space=act)}
    mapping = PolicyMapping({"adversary_*": "predator", "*": "prey"}, list(specs))
    resolved, agents_of = resolve_policies(tag_env, specs, mapping)
    assert agents_of["spectator"] == []
    assert resolved["spectator"].observation_space == obs and resolved["spectator"].action_space == act


# -- PolicySpec.from_any -----------------------------------------------------------------


def test_policy_spec_from_any():
    assert PolicySpec.from_any("p", None) == PolicySpec()
    spec = PolicySpec(module_class="a.b:C")
    assert PolicySpec.from_any("p", spec) is spec
    built = PolicySpec.from_any("p", {"module_class": "x:Y", "model": {"hiddens": [4]}})
    assert built.module_class == "x:Y" and built.model == {"hiddens": [4]}


def test_policy_spec_from_any_rejects_unknown_keys():
    with pytest.raises(MappingError) as info:
        PolicySpec.from_any("predator", {"modle": {}, "model": {}})
    msg = str(info.value)
    assert "predator" in msg and "modle" in msg


def test_policy_spec_from_any_rejects_wrong_type():
    with pytest.raises(MappingError, match="str"):
        PolicySpec.from_any("p", "not a spec")


def test_policy_spec_from_any_model_null_or_bad_type():
    assert PolicySpec.from_any("p", {"model": None}).model == {}
    with pytest.raises(MappingError, match="model"):
        PolicySpec.from_any("p", {"model": [1, 2]})


class _FakeEnv:
    """Just what resolve_policies reads: possible_agents and per-agent spaces."""

    def __init__(self, spaces: dict):
        self.possible_agents = list(spaces)
        self._spaces = spaces

    def observation_space(self, agent):
        return self._spaces[agent][0]

    def action_space(self, agent):
        return self._spaces[agent][1]


def test_sharing_policy_across_different_action_spaces_raises():
    obs = gym.spaces.Box(-1, 1, (4,), np.float32)
    env = _FakeEnv({"a_0": (obs, gym.spaces.Discrete(3)), "a_1": (obs, gym.spaces.Discrete(7))})
    with pytest.raises(MappingError) as info:
        resolve_policies(env, {"shared": PolicySpec()}, PolicyMapping(None, ["shared"]))
    msg = str(info.value)
    assert "shared" in msg and "action" in msg
    assert "a_1" in msg and "Discrete(7)" in msg and "Discrete(3)" in msg


def test_agents_with_equal_spaces_share_a_policy():
    obs = gym.spaces.Box(-1, 1, (4,), np.float32)
    env = _FakeEnv({f"a_{i}": (obs, gym.spaces.Discrete(3)) for i in range(3)})
    resolved, agents_of = resolve_policies(env, {"shared": PolicySpec()}, PolicyMapping(None, ["shared"]))
    assert agents_of == {"shared": ["a_0", "a_1", "a_2"]}
    assert resolved["shared"].observation_space == obs
