"""PettingZoo's AEC-to-parallel conversion stepped without its discarded observations
(marl/envs/pettingzoo_conversion.py): the same step results as upstream's wrapper, bit for bit, with
half the observing."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.spaces import Box, Discrete
from pettingzoo.utils.conversions import aec_to_parallel_wrapper, parallel_to_aec
from pettingzoo.utils.env import ParallelEnv

from marl.envs import make_env
from marl.envs.pettingzoo_conversion import ObserveOnceConversion, observing_once


class _Relay(ParallelEnv):
    """Agents leave at different cycles (runner_i terminates after i+1 steps, the last truncates), with
    float observations, rewards that differ per agent and step, and infos that carry the step."""

    metadata = {"name": "relay", "is_parallelizable": True}
    render_mode = None

    def __init__(self, n: int = 4) -> None:
        self.possible_agents = [f"runner_{i}" for i in range(n)]

    def observation_space(self, agent: str) -> gymnasium.Space:
        return Box(-np.inf, np.inf, (3,), np.float32)

    def action_space(self, agent: str) -> gymnasium.Space:
        return Discrete(3)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        self.rng = np.random.default_rng(seed)
        return {a: self.rng.normal(size=3).astype(np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        last = self.possible_agents[-1]
        terms = {a: self.possible_agents.index(a) < self.t and a != last for a in actions}
        truncs = {a: a == last and self.t >= len(self.possible_agents) for a in actions}
        obs = {a: self.rng.normal(size=3).astype(np.float32) for a in actions}
        rewards = {a: float(actions[a]) * 0.5 - self.rng.random() for a in actions}
        self.agents = [a for a in actions if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, {a: {"t": self.t} for a in actions}


def _pistonball(**kw):
    from pettingzoo.butterfly import pistonball_v6

    return pistonball_v6.parallel_env(n_pistons=4, max_cycles=30, **kw)


def _simple_tag():
    from mpe2 import simple_tag_v3

    return simple_tag_v3.parallel_env(max_cycles=20)


def _relay():
    return aec_to_parallel_wrapper(parallel_to_aec(_Relay()))


ENVS = {"pistonball": _pistonball, "pistonball_continuous": lambda: _pistonball(continuous=True),
        "simple_tag": _simple_tag, "relay": _relay}


def _same(a, b) -> None:
    """Equal bit for bit: same keys, same types, arrays of the same dtype, shape and bytes."""
    if isinstance(a, tuple):
        assert type(b) is tuple and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b), (a, b)
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), (a, b)


@pytest.mark.parametrize("name", list(ENVS))
def test_steps_are_upstreams_bit_for_bit(name: str) -> None:
    upstream, ours = ENVS[name](), observing_once(ENVS[name]())
    assert type(ours) is ObserveOnceConversion and type(upstream) is aec_to_parallel_wrapper
    actions_rng = np.random.default_rng(0)
    steps = 0
    for episode in range(2):
        _same(upstream.reset(seed=episode), ours.reset(seed=episode))
        while upstream.agents:
            space = upstream.action_space(upstream.agents[0])
            if isinstance(space, Box):
                actions = {a: actions_rng.uniform(space.low, space.high).astype(space.dtype) for a in upstream.agents}
            else:
                actions = {a: int(actions_rng.integers(space.n)) for a in upstream.agents}
            _same(upstream.step(actions), ours.step(actions))
            assert ours.agents == upstream.agents
            steps += 1
    assert steps >= 8
    upstream.close()
    ours.close()


@pytest.mark.parametrize("name", ["pistonball", "simple_tag"])
def test_each_agent_is_observed_once_a_step(name: str) -> None:
    observed = {}
    envs = {"upstream": ENVS[name](), "ours": observing_once(ENVS[name]())}
    for side, env in envs.items():
        raw = env.unwrapped
        observe = raw.observe

        def counting(agent, side=side, observe=observe):
            observed[side] = observed.get(side, 0) + 1
            return observe(agent)

        raw.observe = counting
        env.reset(seed=0)
        observed[side] = 0
        for _ in range(5):
            env.step({a: env.action_space(a).sample() for a in env.agents})
    agents = len(envs["ours"].possible_agents)
    assert observed == {"upstream": 2 * 5 * agents, "ours": 5 * agents}


def test_the_default_pistonball_env_observes_each_piston_once_a_step() -> None:
    """What `marl train --algo PPO --env pettingzoo.butterfly.pistonball_v6` steps: SuperSuit's resize (its
    `wrappers: auto`) re-converts the env, and the adapter's conversion is the outer one."""
    adapter = make_env("pettingzoo.butterfly.pistonball_v6", {"n_pistons": 4, "max_cycles": 10},
                       wrappers=[{"resize_v1": {"x_size": 42, "y_size": 42}}])
    assert type(adapter.env) is ObserveOnceConversion
    raw, calls = adapter.env.unwrapped, []
    observe = raw.observe
    raw.observe = lambda agent: calls.append(agent) or observe(agent)
    adapter.reset(seed=0)
    calls.clear()
    obs, *_ = adapter.step({a: adapter.action_space(a).sample() for a in adapter.possible_agents})
    assert sorted(calls) == sorted(adapter.possible_agents) and obs["piston_0"].shape == (42, 42, 3)


def test_only_pettingzoos_own_conversion_is_changed_also_under_parallel_wrappers() -> None:
    from pettingzoo.utils.wrappers import BaseParallelWrapper

    under = BaseParallelWrapper(_pistonball())
    assert observing_once(under) is under and type(under.env) is ObserveOnceConversion

    class OwnStep(aec_to_parallel_wrapper):  # a user's subclass may step its own way: left as it is
        pass

    own = OwnStep(parallel_to_aec(_Relay()))
    assert type(observing_once(own)) is OwnStep
    native = _Relay()  # a parallel env that is no conversion
    assert observing_once(native) is native and type(native) is _Relay
