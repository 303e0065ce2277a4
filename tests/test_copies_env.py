"""`copies.<Gymnasium id>`: N independent copies of a single-agent env as one multi-agent env (RLlib's make_multi_agent)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from marl.envs import EnvChecker, EnvError, make_env
from marl.envs.base import ALL


def test_copies_are_agents_with_the_single_agent_spaces_and_seeded_apart():
    env = make_env("copies.CartPole-v1", {"num_agents": 3})
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    single = gymnasium.make("CartPole-v1")
    assert all(env.observation_space(a) == single.observation_space and env.action_space(a) == single.action_space
               for a in env.possible_agents)
    obs, _ = env.reset(seed=7)
    for i, agent in enumerate(env.possible_agents):  # copy i is seeded with seed + i: the same state as a lone env
        np.testing.assert_array_equal(obs[agent], single.reset(seed=7 + i)[0])
    assert not np.array_equal(obs["agent_0"], obs["agent_1"])


def test_an_ended_copy_drops_out_and_the_episode_ends_when_every_copy_has():
    env = make_env("copies.CartPole-v1", {"num_agents": 2})
    checker = EnvChecker(env, "copies")
    obs, _ = env.reset(seed=0)
    checker.check_reset(obs)
    total = {"agent_0": 0.0, "agent_1": 0.0}
    live, t, agent_0_ended_at = set(env.possible_agents), 0, None
    while True:
        # agent_0 always pushes left (its pole falls within ~10 steps); agent_1 balances with a simple rule.
        actions = {a: 0 if a == "agent_0" else int(obs[a][2] + 0.5 * obs[a][3] > 0) for a in live}
        obs, rewards, terminateds, truncateds, _ = env.step(actions)
        t += 1
        checker.check_step(actions, obs, rewards, terminateds, truncateds, t)
        assert set(rewards) == set(actions)  # only the copies that stepped pay out
        for agent, reward in rewards.items():
            total[agent] += reward
        for agent in list(live):
            if terminateds[agent] or truncateds[agent]:
                live.discard(agent)
                if agent == "agent_0":
                    agent_0_ended_at = t
        if terminateds[ALL]:
            assert truncateds[ALL] and not live
            break
        assert not truncateds[ALL] and set(obs) >= live
    assert agent_0_ended_at is not None and agent_0_ended_at < 30 < t  # agent_1 outlived agent_0 by many steps
    assert total == {"agent_0": float(agent_0_ended_at), "agent_1": float(t)}  # CartPole pays 1 per step
    with pytest.raises(EnvError, match="expected actions for"):
        env.step({"agent_0": 0, "agent_1": 0})  # the episode is over: no copy is live


def test_pendulum_copies_pass_make_kwargs_and_step_box_actions():
    env = make_env("copies.Pendulum-v1", {"num_agents": 2, "max_episode_steps": 5})
    obs, _ = env.reset(seed=1)
    for _ in range(5):
        obs, rewards, terminateds, truncateds, _ = env.step({a: np.array([0.5], np.float32) for a in obs})
        assert all(r <= 0 for r in rewards.values())
    assert truncateds["agent_0"] and truncateds["agent_1"] and truncateds[ALL]


@pytest.mark.parametrize("name, config, message", [
    ("copies.CartPole-v1", {"num_agents": 0}, r"'num_agents' must be an integer >= 1, got 0"),
    ("copies.NoSuchEnv-v0", {}, r"'NoSuchEnv-v0' is not a Gymnasium id"),
    ("copies.CartPole-v1", {"num_agents": 2, "bogus": 1}, r"rejected its env_config \['bogus'\]"),
])
def test_bad_copies_config_is_one_line(name, config, message):
    with pytest.raises(EnvError, match=message) as err:
        make_env(name, config)
    assert "\n" not in str(err.value)
