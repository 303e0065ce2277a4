"""Tests for marl.envs: the MultiAgentEnv protocol as seen through each adapter."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.spaces import Box, Dict, Discrete
from pettingzoo.utils.env import ParallelEnv

from marl.envs import (
    AECEnvAdapter,
    EnvError,
    GymnasiumAdapter,
    MultiAgentEnv,
    ParallelEnvAdapter,
    make_env,
    register_env,
    registered_envs,
    wrap_env,
)

ALL = "__all__"


@pytest.fixture(autouse=True)
def _isolated_registry():
    """Keep names registered by one test from leaking into others."""
    from marl.envs import registry

    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


def _ended(terms: dict[str, bool], truncs: dict[str, bool]) -> set[str]:
    return {a for a in set(terms) | set(truncs) if a != ALL and (terms.get(a) or truncs.get(a))}


def run_episode(
    env: MultiAgentEnv, seed: int = 0, max_steps: int = 10_000
) -> dict[str, Any]:
    """Play one episode with random (mask-respecting) actions, checking the protocol.

    Returns a summary: steps, per-agent reward totals, the agents that ended with
    their flags, and the largest number of agents that were ever asked to act at once.
    """
    rng = np.random.default_rng(seed)
    obs, infos = env.reset(seed=seed)
    assert obs, "reset must name at least one actor"
    assert set(infos) <= set(env.possible_agents)
    alive_actors = set(obs)
    totals: dict[str, float] = {}
    ended: dict[str, tuple[bool, bool]] = {}
    max_actors = len(obs)
    for step in range(1, max_steps + 1):
        actions = {}
        for agent in alive_actors:
            o = obs[agent]
            if isinstance(o, dict) and "action_mask" in o:
                actions[agent] = int(rng.choice(np.flatnonzero(o["action_mask"])))
            else:
                actions[agent] = env.action_space(agent).sample()
        obs, rewards, terms, truncs, infos = env.step(actions)
        assert ALL in terms and ALL in truncs
        for agent, r in rewards.items():
            assert type(r) is float
            totals[agent] = totals.get(agent, 0.0) + r
        now_ended = _ended(terms, truncs)
        for agent in now_ended:
            assert agent not in ended, f"{agent} reported ended twice"
            assert agent in obs, f"{agent} ended without a final observation"
            ended[agent] = (bool(terms.get(agent)), bool(truncs.get(agent)))
        if terms[ALL] or truncs[ALL]:
            return {"steps": step, "totals": totals, "ended": ended, "max_actors": max_actors}
        alive_actors = set(obs) - now_ended
        assert alive_actors, "episode not over but nobody to act"
        max_actors = max(max_actors, len(alive_actors))
    raise AssertionError("episode did not end")


# -- PettingZoo parallel -----------------------------------------------------


@pytest.fixture
def spread() -> MultiAgentEnv:
    env = make_env("mpe2.simple_spread_v3", {"N": 3, "max_cycles": 25})
    yield env
    env.close()


def test_simple_spread_spaces_and_metadata(spread: MultiAgentEnv) -> None:
    assert isinstance(spread, ParallelEnvAdapter)
    assert spread.possible_agents == ["agent_0", "agent_1", "agent_2"]
    for agent in spread.possible_agents:
        assert spread.observation_space(agent).shape == (18,)
        assert spread.action_space(agent) == Discrete(5)
    assert spread.metadata["name"] == "simple_spread_v3"
    assert spread.metadata["turn_based"] is False
    with pytest.raises(EnvError, match="no_such_agent"):
        spread.observation_space("no_such_agent")


def test_simple_spread_episode_truncates_all_at_max_cycles(spread: MultiAgentEnv) -> None:
    obs, _ = spread.reset(seed=1)
    assert set(obs) == set(spread.possible_agents)
    assert all(o.shape == (18,) for o in obs.values())
    state = spread.state()
    assert isinstance(state, np.ndarray) and state.shape == (54,)

    summary = run_episode(spread, seed=1)
    assert summary["steps"] == 25
    assert summary["ended"] == {a: (False, True) for a in spread.possible_agents}
    assert set(summary["totals"]) == set(spread.possible_agents)


class _Race(ParallelEnv):
    """Parallel env where runner_i terminates after i+1 steps (the last one truncates).

    It returns its internal flag dicts from step(), as some PettingZoo envs do, so
    an adapter that adds "__all__" in place would corrupt it.
    """

    metadata = {"name": "race"}
    render_mode = None

    def __init__(self, n: int = 3) -> None:
        self.possible_agents = [f"runner_{i}" for i in range(n)]

    def observation_space(self, agent: str) -> gymnasium.Space:
        return Discrete(10)

    def action_space(self, agent: str) -> gymnasium.Space:
        return Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        return {a: 0 for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.t += 1
        last = self.possible_agents[-1]
        self.terminations = {
            a: self.possible_agents.index(a) < self.t and a != last for a in actions
        }
        self.truncations = {a: a == last and self.t >= len(self.possible_agents) for a in actions}
        obs = {a: self.t for a in actions}
        rewards = {a: 1 for a in actions}  # ints on purpose: adapter must make floats
        self.agents = [a for a in actions if not (self.terminations[a] or self.truncations[a])]
        return obs, rewards, self.terminations, self.truncations, {a: {} for a in actions}


def test_parallel_agents_ending_at_different_steps() -> None:
    env = wrap_env(_Race())
    assert isinstance(env, ParallelEnvAdapter)
    assert env.metadata == {"name": "race", "turn_based": False}
    assert env.state() is None  # ParallelEnv.state() raises NotImplementedError
    obs, _ = env.reset()
    obs, rewards, terms, truncs, _ = env.step({a: 0 for a in obs})
    assert terms == {"runner_0": True, "runner_1": False, "runner_2": False, ALL: False}
    assert rewards == {"runner_0": 1.0, "runner_1": 1.0, "runner_2": 1.0}
    assert ALL not in env.env.terminations and ALL not in env.env.truncations
    summary = run_episode(env)
    assert summary["steps"] == 3
    assert summary["ended"] == {
        "runner_0": (True, False),
        "runner_1": (True, False),
        "runner_2": (False, True),
    }
    assert summary["totals"] == {"runner_0": 1.0, "runner_1": 2.0, "runner_2": 3.0}


def test_aec_agents_ending_mid_game_are_reported_once() -> None:
    from pettingzoo.utils.conversions import parallel_to_aec

    env = wrap_env(parallel_to_aec(_Race()))
    assert isinstance(env, AECEnvAdapter)
    summary = run_episode(env)
    assert summary["max_actors"] == 1
    assert summary["ended"] == {
        "runner_0": (True, False),
        "runner_1": (True, False),
        "runner_2": (False, True),
    }
    assert summary["totals"] == {"runner_0": 1.0, "runner_1": 2.0, "runner_2": 3.0}


def test_simple_tag_agents_have_different_spaces() -> None:
    env = make_env("mpe2.simple_tag_v3", {"max_cycles": 5})
    assert env.possible_agents == ["adversary_0", "adversary_1", "adversary_2", "agent_0"]
    adv = env.observation_space("adversary_0")
    good = env.observation_space("agent_0")
    assert adv.shape != good.shape
    summary = run_episode(env)
    assert summary["steps"] == 5
    assert set(summary["ended"]) == set(env.possible_agents)
    env.close()


def test_parallel_seeding_is_reproducible(spread: MultiAgentEnv) -> None:
    a, _ = spread.reset(seed=3)
    b, _ = spread.reset(seed=3)
    c, _ = spread.reset(seed=4)
    for agent in spread.possible_agents:
        np.testing.assert_array_equal(a[agent], b[agent])
    assert any(not np.array_equal(a[x], c[x]) for x in spread.possible_agents)


@pytest.mark.parametrize("name, config", [("mpe2.simple_spread_v3", {"N": 3, "max_cycles": 25}),
                                          ("mpe2.simple_tag_v3", {"max_cycles": 25}),
                                          ("mpe2.simple_spread_v3", {"N": 2, "max_cycles": 10, "continuous_actions": True})])
def test_parallel_conversions_lose_only_the_guard_wrappers_and_step_the_same(name, config) -> None:
    """make_env takes PettingZoo's OrderEnforcing and AssertOutOfBounds wrappers out of an AEC-to-parallel
    conversion (their attribute forwarding was a third of simple_spread's step); observations, rewards and
    flags stay those of the env as PettingZoo builds it, step for step, over several episodes."""
    import importlib

    from pettingzoo.utils.wrappers import AssertOutOfBoundsWrapper, BaseWrapper, OrderEnforcingWrapper

    env = make_env(name, config)
    chain, inner = [], env.env.aec_env
    while True:
        chain.append(type(inner))
        if not isinstance(inner, BaseWrapper):
            break
        inner = inner.env
    assert OrderEnforcingWrapper not in chain and AssertOutOfBoundsWrapper not in chain, chain
    reference = importlib.import_module(name).parallel_env(**config)
    assert isinstance(reference.aec_env, OrderEnforcingWrapper)  # PettingZoo's own build keeps them
    rng = np.random.default_rng(0)
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        ref_obs, _ = reference.reset(seed=episode)
        for agent in ref_obs:
            np.testing.assert_array_equal(obs[agent], ref_obs[agent])
        while reference.agents:
            if config.get("continuous_actions"):
                actions = {a: reference.action_space(a).sample() for a in reference.agents}
            else:
                actions = {a: int(rng.integers(reference.action_space(a).n)) for a in reference.agents}
            obs, rewards, terminateds, truncateds, _ = env.step(actions)
            ref_obs, ref_rewards, ref_terms, ref_truncs, _ = reference.step(actions)
            for agent in ref_obs:
                np.testing.assert_array_equal(obs[agent], ref_obs[agent])
            assert rewards == {a: float(r) for a, r in ref_rewards.items()}
            assert {a: terminateds[a] for a in ref_terms} == ref_terms and {a: truncateds[a] for a in ref_truncs} == ref_truncs
    env.close()
    reference.close()


def test_guard_wrappers_go_only_from_conversions_and_other_wrappers_stay() -> None:
    from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    from pettingzoo.utils.wrappers import ClipOutOfBoundsWrapper, OrderEnforcingWrapper
    from mpe2 import simple_spread_v3

    from marl.envs.pettingzoo import without_guard_wrappers

    raw = simple_spread_v3.raw_env(N=2, max_cycles=5, continuous_actions=True)
    clipped = ClipOutOfBoundsWrapper(raw)
    converted = without_guard_wrappers(aec_to_parallel_wrapper(OrderEnforcingWrapper(clipped)))
    assert converted.aec_env is clipped and clipped.env is raw  # a wrapper that changes actions is kept
    native = simple_spread_v3.env(N=2, max_cycles=5)  # an AEC env, not a conversion: left as it is
    assert without_guard_wrappers(native) is native and isinstance(native, OrderEnforcingWrapper)


# -- PettingZoo AEC (turn-based) ----------------------------------------------


@pytest.fixture
def c4() -> MultiAgentEnv:
    env = make_env("pettingzoo.classic.connect_four_v3")
    yield env
    env.close()


def test_connect_four_is_turn_based_with_masks(c4: MultiAgentEnv) -> None:
    assert isinstance(c4, AECEnvAdapter)
    assert c4.metadata["turn_based"] is True
    assert c4.possible_agents == ["player_0", "player_1"]
    assert isinstance(c4.observation_space("player_0"), Dict)
    assert c4.state() is None  # connect_four has no state(); must not raise
    obs, _ = c4.reset(seed=0)
    assert list(obs) == ["player_0"]
    assert obs["player_0"]["action_mask"].shape == (7,)
    obs, rewards, terms, truncs, _ = c4.step({"player_0": 3})
    assert list(obs) == ["player_1"]
    assert "action_mask" in obs["player_1"]
    assert terms[ALL] is False and truncs[ALL] is False
    assert _ended(terms, truncs) == set()


@pytest.mark.parametrize("seed", range(8))
def test_connect_four_random_game_ends_for_both_players_once(c4: MultiAgentEnv, seed: int) -> None:
    summary = run_episode(c4, seed=seed)
    assert summary["max_actors"] == 1
    assert summary["ended"] == {"player_0": (True, False), "player_1": (True, False)}
    totals = summary["totals"]
    assert sum(totals.values()) == 0
    assert sorted(totals.values()) in ([-1.0, 1.0], [0.0, 0.0])


def test_connect_four_win_reports_both_players_with_final_obs(c4: MultiAgentEnv) -> None:
    c4.reset(seed=0)
    # player_0 stacks column 0, player_1 column 1: player_0 wins on its 4th move.
    for _ in range(3):
        obs, *_ = c4.step({"player_0": 0})
        assert list(obs) == ["player_1"]
        obs, *_ = c4.step({"player_1": 1})
        assert list(obs) == ["player_0"]
    obs, rewards, terms, truncs, _ = c4.step({"player_0": 0})
    assert set(obs) == {"player_0", "player_1"}
    assert "action_mask" in obs["player_0"] and "observation" in obs["player_1"]
    assert rewards == {"player_0": 1.0, "player_1": -1.0}
    assert terms == {"player_0": True, "player_1": True, ALL: True}
    assert truncs[ALL] is True
    with pytest.raises(EnvError, match="reset"):
        c4.step({"player_1": 0})


def test_connect_four_wrong_agent_raises(c4: MultiAgentEnv) -> None:
    c4.reset(seed=0)
    with pytest.raises(EnvError, match="player_0.*player_1"):
        c4.step({"player_1": 0})
    with pytest.raises(EnvError):
        c4.step({"player_0": 0, "player_1": 0})


def test_aec_seeding_is_reproducible(c4: MultiAgentEnv) -> None:
    a, _ = c4.reset(seed=3)
    b, _ = c4.reset(seed=3)
    np.testing.assert_array_equal(a["player_0"]["observation"], b["player_0"]["observation"])


# -- Gymnasium ----------------------------------------------------------------


def test_cartpole_single_agent_episode() -> None:
    env = make_env("CartPole-v1")
    assert isinstance(env, GymnasiumAdapter)
    assert env.possible_agents == ["agent_0"]
    assert env.state() is None
    assert env.metadata == {**env.metadata, "name": "CartPole-v1", "turn_based": False}
    assert env.action_space("agent_0") == Discrete(2)
    assert isinstance(env.observation_space("agent_0"), Box)
    obs, infos = env.reset(seed=0)
    assert list(obs) == ["agent_0"] and list(infos) == ["agent_0"]
    summary = run_episode(env, seed=0)
    assert summary["steps"] < 500
    assert summary["ended"] == {"agent_0": (True, False)}
    assert summary["totals"]["agent_0"] == float(summary["steps"])
    with pytest.raises(EnvError, match="agent_0"):
        env.step({"someone_else": 0})


def test_cartpole_env_config_goes_to_gymnasium_make() -> None:
    env = make_env("CartPole-v1", {"max_episode_steps": 10})
    obs, _ = env.reset(seed=0)
    for t in range(1, 11):
        # Alternate pushes so the pole does not fall before the time limit.
        obs, _, terms, truncs, _ = env.step({"agent_0": t % 2})
        if t < 10:
            assert not truncs[ALL]
    assert truncs == {"agent_0": True, ALL: True}
    assert terms == {"agent_0": False, ALL: True}
    assert "agent_0" in obs


def test_gymnasium_seeding_is_reproducible() -> None:
    env = make_env("CartPole-v1")
    a, _ = env.reset(seed=3)
    b, _ = env.reset(seed=3)
    np.testing.assert_array_equal(a["agent_0"], b["agent_0"])


def test_gymnasium_adapter_custom_agent_id() -> None:
    env = GymnasiumAdapter(gymnasium.make("CartPole-v1"), agent_id="pilot")
    obs, _ = env.reset(seed=0)
    assert env.possible_agents == ["pilot"] and list(obs) == ["pilot"]
    _, rewards, terms, _, _ = env.step({"pilot": 0})
    assert rewards == {"pilot": 1.0} and set(terms) == {"pilot", ALL}


# -- wrap_env / register_env --------------------------------------------------


class _Coin(MultiAgentEnv):
    """Minimal hand-written MultiAgentEnv: one flip, episode over."""

    possible_agents = ["flipper"]
    metadata = {"name": "coin", "turn_based": False}

    def __init__(self, reward: float = 1.0) -> None:
        self.reward = reward

    def observation_space(self, agent: str) -> gymnasium.Space:
        return Discrete(1)

    def action_space(self, agent: str) -> gymnasium.Space:
        return Discrete(2)

    def reset(self, seed: int | None = None):
        return {"flipper": 0}, {"flipper": {}}

    def step(self, actions):
        return (
            {"flipper": 0},
            {"flipper": float(self.reward)},
            {"flipper": True, ALL: True},
            {"flipper": False, ALL: True},
            {"flipper": {}},
        )


def _pz_parallel(cfg: dict) -> Any:
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(**cfg)


def _pz_aec(cfg: dict) -> Any:
    from pettingzoo.classic import connect_four_v3

    return connect_four_v3.env(**cfg)


@pytest.mark.parametrize(
    "creator, config, adapter",
    [
        (lambda cfg: _Coin(**cfg), {"reward": 2.5}, _Coin),
        (_pz_parallel, {"N": 2, "max_cycles": 3}, ParallelEnvAdapter),
        (_pz_aec, {}, AECEnvAdapter),
        (
            lambda cfg: gymnasium.make("CartPole-v1", **cfg),
            {"max_episode_steps": 4},
            GymnasiumAdapter,
        ),
    ],
    ids=["multiagentenv", "parallel", "aec", "gymnasium"],
)
def test_register_env_accepts_each_kind(creator, config, adapter) -> None:
    seen: list[dict] = []

    def recording_creator(cfg: dict) -> Any:
        seen.append(dict(cfg))
        return creator(cfg)

    register_env("test-kind", recording_creator)
    assert "test-kind" in registered_envs()
    env = make_env("test-kind", config)
    assert isinstance(env, adapter)
    assert seen == [config]
    summary = run_episode(env)
    assert summary["ended"]
    if adapter is _Coin:
        assert summary["totals"] == {"flipper": 2.5}
    if adapter is ParallelEnvAdapter:
        assert env.possible_agents == ["agent_0", "agent_1"] and summary["steps"] == 3
    if adapter is GymnasiumAdapter:
        assert summary["steps"] <= 4


def test_register_env_replaces_previous_creator() -> None:
    register_env("test-replace", lambda cfg: _Coin(reward=1.0))
    register_env("test-replace", lambda cfg: _Coin(reward=7.0))
    env = make_env("test-replace")
    env.reset()
    assert env.step({"flipper": 0})[1] == {"flipper": 7.0}
    assert registered_envs().count("test-replace") == 1


def test_register_env_shadows_gymnasium_id() -> None:
    register_env("Pendulum-v1", lambda cfg: _Coin())
    assert isinstance(make_env("Pendulum-v1"), _Coin)


def test_wrap_env_dispatch_and_rejection() -> None:
    coin = _Coin()
    assert wrap_env(coin) is coin
    assert isinstance(wrap_env(gymnasium.make("CartPole-v1")), GymnasiumAdapter)
    with pytest.raises(EnvError, match="dict.*ParallelEnv.*AECEnv.*gymnasium.Env"):
        wrap_env({"not": "an env"})
    register_env("test-bad-object", lambda cfg: 42)
    with pytest.raises(EnvError, match="test-bad-object.*int"):
        make_env("test-bad-object")


def test_env_api_forces_aec_for_a_parallel_module() -> None:
    env = make_env("mpe2.simple_spread_v3", {"N": 2, "max_cycles": 2, "env_api": "aec"})
    assert isinstance(env, AECEnvAdapter)
    summary = run_episode(env)
    assert summary["max_actors"] == 1
    assert set(summary["ended"]) == {"agent_0", "agent_1"}
    with pytest.raises(EnvError, match="env_api"):
        make_env("mpe2.simple_spread_v3", {"env_api": "sideways"})


# -- errors -------------------------------------------------------------------


def test_a_module_missing_from_its_package_names_the_package_modules() -> None:
    # PettingZoo 1.27 ships pursuit_v5: a name from another release's docs finds its current version
    with pytest.raises(EnvError) as err:
        make_env("pettingzoo.sisl.pursuit_v4")
    msg = str(err.value)
    assert "did you mean pettingzoo.sisl.pursuit_v5? pettingzoo.sisl has: multiwalker_v9, pursuit_v5" in msg, msg
    with pytest.raises(EnvError) as err:  # nothing close: the package's env modules still listed
        make_env("pettingzoo.sisl.waterworld_v4")
    assert "No module named 'pettingzoo.sisl.waterworld_v4'; pettingzoo.sisl has: multiwalker_v9" in str(err.value)
    with pytest.raises(EnvError) as err:  # no package above it: nothing to list
        make_env("nosuch.pkg_v1")
    assert "has:" not in str(err.value) and "\n" not in str(err.value)


def test_unknown_gymnasium_style_name() -> None:
    register_env("test-listed", lambda cfg: _Coin())
    with pytest.raises(EnvError) as err:
        make_env("NoSuchEnv-v0")
    msg = str(err.value)
    assert msg.startswith("unknown env 'NoSuchEnv-v0': tried")
    assert "register_env" in msg and "Gymnasium" in msg and "module" in msg
    assert "test-listed" in msg  # lists registered names


def test_unknown_module_path_reports_import_error() -> None:
    with pytest.raises(EnvError) as err:
        make_env("nosuchpkg.nosuch_env")
    msg = str(err.value)
    assert "'nosuchpkg.nosuch_env'" in msg
    assert "No module named 'nosuchpkg'" in msg
    assert "Gymnasium" in msg


def test_suggests_close_gymnasium_id() -> None:
    with pytest.raises(EnvError, match="Did you mean: CartPole-v1"):
        make_env("Cartpole-v1")


@pytest.mark.parametrize(
    "name",
    ["mpe2.simple_spread_v3", "pettingzoo.classic.connect_four_v3", "CartPole-v1", "test-typo"],
)
def test_bad_env_config_key_names_the_key(name: str) -> None:
    register_env("test-typo", lambda cfg: _Coin(**cfg))
    with pytest.raises(EnvError) as err:
        make_env(name, {"num_agnets": 3})
    msg = str(err.value)
    assert name in msg and "num_agnets" in msg
