"""Env families plugging in without user code: Gymnasium tuple envs (lbforaging, rware),
duck-typed PettingZoo wrappers, SuperSuit wrappers named in the scenario, agents that die
mid-episode (knights_archers_zombies), MAgent2. Each family's test skips (with the reason)
only when its optional extra is not installed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marl.envs import EnvError, make_env, wrap_env
from marl.envs.gymnasium import TupleMultiAgentAdapter
from marl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
ALL = "__all__"


def needs(module: str, extra: str):
    """Skip only when the optional package is absent, saying which extra installs it."""
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} not installed: pip install 'marl[{extra}]'")


def run_cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


# -- Gymnasium tuple envs ----------------------------------------------------------------

@needs("lbforaging", "lbforaging")
def test_lbforaging_is_a_multi_agent_env_with_individual_rewards():
    env = make_env("lbforaging:Foraging-8x8-2p-2f-v3")
    assert isinstance(env, TupleMultiAgentAdapter)
    assert env.possible_agents == ["agent_0", "agent_1"]
    assert env.action_space("agent_1").n == 6 and env.observation_space("agent_0").shape == (12,)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    total, steps, done = {a: 0.0 for a in env.possible_agents}, 0, False
    while not done:
        assert set(obs) == set(env.possible_agents)
        obs, rew, terms, truncs, _ = env.step({a: int(rng.integers(6)) for a in obs})
        for a, r in rew.items():
            total[a] += r
        done, steps = terms[ALL], steps + 1
        assert terms[ALL] == truncs[ALL]
    assert steps <= 50  # the registered max_episode_steps ends it (as a termination: the env says so)
    with pytest.raises(EnvError, match="no agent 'agent_2'"):
        env.observation_space("agent_2")


@needs("rware", "rware")
def test_rware_tiny_two_agents():
    env = make_env("rware:rware-tiny-2ag-v2")
    assert env.possible_agents == ["agent_0", "agent_1"] and env.action_space("agent_0").n == 5
    obs, _ = env.reset(seed=0)
    obs, rew, terms, _, _ = env.step({"agent_0": 1, "agent_1": 0})
    assert set(rew) == {"agent_0", "agent_1"} and terms[ALL] is False
    with pytest.raises(EnvError, match=r"no action for \['agent_1'\]"):
        env.step({"agent_0": 1})


def test_a_team_reward_goes_to_every_agent_and_an_unknown_id_names_the_family():
    import gymnasium

    class TeamEnv(gymnasium.Env):
        observation_space = gymnasium.spaces.Tuple([gymnasium.spaces.Box(0, 1, (2,))] * 3)
        action_space = gymnasium.spaces.Tuple([gymnasium.spaces.Discrete(2)] * 3)

        def reset(self, seed=None, options=None):
            return tuple(np.zeros(2, np.float32) for _ in range(3)), {}

        def step(self, actions):
            return tuple(np.ones(2, np.float32) for _ in range(3)), 1.5, [True, True, False], False, {}

    env = wrap_env(TeamEnv())
    env.reset()
    _, rew, terms, _, _ = env.step({f"agent_{i}": 0 for i in range(3)})
    assert rew == {"agent_0": 1.5, "agent_1": 1.5, "agent_2": 1.5}
    assert terms == {"agent_0": False, "agent_1": False, "agent_2": False, ALL: False}  # agent_2 plays on


# -- duck-typed PettingZoo wrappers ------------------------------------------------------

class Guard:
    """What users write to log or shape rewards: forwards every attribute to the env."""

    def __init__(self, env):
        self.env = env
        self.steps = 0

    def step(self, actions):
        self.steps += 1
        return self.env.step(actions)

    def __getattr__(self, name):
        return getattr(self.env, name)


def test_a_duck_typed_parallel_wrapper_is_accepted_and_trains():
    from mpe2 import simple_spread_v3

    from marl.algorithms.ppo import PPOConfig

    guard = Guard(simple_spread_v3.parallel_env(N=2, max_cycles=10))
    env = wrap_env(guard)
    assert env.possible_agents == ["agent_0", "agent_1"] and not env.metadata["turn_based"]

    from marl import register_env
    register_env("guarded_spread", lambda cfg: Guard(simple_spread_v3.parallel_env(N=2, max_cycles=10)))
    algo = (PPOConfig().environment(env="guarded_spread")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=16)
            .training(train_batch_size=64, minibatch_size=32, num_epochs=1).build())
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["env_steps_total"] == 64 and np.isfinite(result["episode_return_mean"])


def test_a_duck_typed_aec_wrapper_is_accepted():
    from pettingzoo.classic import tictactoe_v3

    env = wrap_env(Guard(tictactoe_v3.env()))
    assert env.metadata["turn_based"]
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_1"]


def test_an_object_missing_a_method_is_refused_naming_it():
    class NoStep:
        possible_agents = ["a"]

        def reset(self, seed=None):
            return {}, {}

        def observation_space(self, agent): ...
        def action_space(self, agent): ...

    with pytest.raises(EnvError, match="looks like a PettingZoo Parallel env but has no 'step' method"):
        wrap_env(NoStep())
    with pytest.raises(EnvError, match="cannot use an object of type builtins.int"):
        wrap_env(3)


# -- SuperSuit wrappers from the scenario -----------------------------------------------

PISTONS = {"n_pistons": 4}
SHRINK = [{"color_reduction_v0": {"mode": "B"}}, {"resize_v1": {"x_size": 16, "y_size": 16}}]


@needs("supersuit", "butterfly")
def test_supersuit_wrappers_named_in_the_scenario_apply_in_order():
    env = make_env("pettingzoo.butterfly.pistonball_v6", PISTONS, SHRINK + ["flatten_v0"])
    space = env.observation_space("piston_0")
    assert space.shape == (256,) and space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs["piston_0"].shape == (256,)


@needs("supersuit", "butterfly")
@pytest.mark.parametrize("wrappers, message", [
    ([{"resize_v2": {"x_size": 8}}], r"'environment.wrappers\[0\]': unknown SuperSuit wrapper 'resize_v2' \(did you mean resize_v1"),
    ([{"resize_v1": {"x": 8}}], r"'environment.wrappers\[0\].resize_v1': .*its arguments are \['x_size', 'y_size'"),
    ([{"color_reduction_v0": {"mode": "Q"}}], r"'environment.wrappers\[0\].color_reduction_v0' .*color_reduction must be in"),
    ("resize_v1", r"'environment.wrappers' must be a list"),
    ([{"resize_v1": {"x_size": 8}, "flatten_v0": None}], r"'environment.wrappers\[0\]' must be a wrapper name or a one-key mapping"),
    (["concat_vec_envs_v1"], r"unknown SuperSuit wrapper 'concat_vec_envs_v1'"),
])
def test_bad_wrappers_are_one_line(wrappers, message):
    with pytest.raises(ConfigError, match=message):
        make_env("pettingzoo.butterfly.pistonball_v6", PISTONS, wrappers)


@needs("supersuit", "butterfly")
def test_a_bad_wrapper_in_a_scenario_is_one_line_from_the_cli(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("algo: PPO\nenvironment:\n  env: pettingzoo.butterfly.pistonball_v6\n"
                        "  wrappers: [{resize_v1: {x_size: 8, ysize: 8}}]\nstop: {iterations: 1}\n")
    p = run_cli("train", str(scenario), "--output", str(tmp_path / "run"))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "'environment.wrappers[0].resize_v1'" in p.stderr
