"""Multi-agent MuJoCo (`mamujoco.<Scenario>_<agent_conf>`, marl.envs.mamujoco): the tasks build, step, give the
robot's state to centralised critics, train one iteration, and `marl envs` lists them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marl.algorithms import config_from_dict
from marl.envs import make_env
from marl.envs.base import EnvError
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gymnasium_robotics") is None or importlib.util.find_spec("mujoco") is None,
    reason="gymnasium-robotics/mujoco not installed: pip install 'marl[mamujoco]'")

# task -> (action dims per agent, state dim): the factorisations the heterogeneous-agent papers report on
TASKS = {
    "mamujoco.HalfCheetah_2x3": ([3, 3], 17),
    "mamujoco.HalfCheetah_6x1": ([1] * 6, 17),
    "mamujoco.Ant_2x4": ([4, 4], 105),
    "mamujoco.Walker2d_2x3": ([3, 3], 17),
}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_task_builds_and_steps_with_its_factorisation(name):
    action_dims, state_dim = TASKS[name]
    env = make_env(name, {"max_episode_steps": 5})
    try:
        obs, _ = env.reset(seed=0)
        agents = list(env.possible_agents)
        assert [env.action_space(a).shape[0] for a in agents] == action_dims and sorted(obs) == agents
        assert env.state().shape == (state_dim,)
        rng = np.random.default_rng(0)
        for step in range(5):
            actions = {a: rng.uniform(-1, 1, env.action_space(a).shape).astype(np.float32) for a in agents}
            obs, rewards, terminated, truncated, _ = env.step(actions)
            assert len(set(rewards.values())) == 1  # one team reward, given to every agent
        assert all(truncated[a] for a in agents) or any(terminated.values())  # max_episode_steps reached the env
    finally:
        env.close()


def test_a_bad_task_name_is_one_line():
    with pytest.raises(EnvError, match=r"did you mean 'mamujoco.HalfCheetah_2x3'"):
        make_env("mamujoco.HalfCheeta_2x3")
    with pytest.raises(EnvError, match=r"Ant has no agent factorisation '3x9'"):
        make_env("mamujoco.Ant_3x9")


def test_marl_envs_lists_the_family():
    out = subprocess.run([sys.executable, "-m", "marl.cli", "envs", "--family", "mamujoco"], cwd=ROOT,
                         capture_output=True, text=True, timeout=HANG_S)
    assert out.returncode == 0, out.stderr
    for name in TASKS:
        assert name in out.stdout


@pytest.mark.parametrize("algo", ["MAPPO", "PPO"])
def test_a_task_trains_one_iteration_with_the_robots_state(algo):
    cfg = config_from_dict({"algo": algo, "environment": {"env": "mamujoco.HalfCheetah_2x3", "env_config": {"max_episode_steps": 40}}},
                           ["training.train_batch_size=320", "training.minibatch_size=160", "training.num_epochs=1",
                            "env_runners.num_envs_per_env_runner=2", "env_runners.rollout_fragment_length=80",
                            "debugging.seed=0"])
    if algo == "MAPPO":
        assert cfg.global_state_spec()["dim"] == 17  # the env's state(): the robot's full observation
    algo_ = cfg.build()
    try:
        result = algo_.train()
        assert result["env_steps_total"] == 160 and np.isfinite(result["episode_return_mean"])
    finally:
        algo_.stop()


def test_hasac_trains_one_iteration_with_an_actor_per_agent():
    cfg = config_from_dict({"algo": "HASAC", "environment": {"env": "mamujoco.HalfCheetah_2x3", "env_config": {"max_episode_steps": 40}}},
                           ["training.num_steps_sampled_before_learning_starts=50", "training.min_env_steps_per_iteration=100",
                            "training.train_batch_size=16", "training.training_intensity=4", "debugging.seed=0",
                            "training.critic_state=global_state"])
    algo = cfg.build()
    try:
        result = algo.train()
        assert len(algo.learners.local.module["default_policy"].actors) == 2
        assert np.isfinite(result["losses/default_policy/actor_0/loss"]) and np.isfinite(result["losses/default_policy/actor_1/loss"])
        assert result["env_steps_total"] >= 100
    finally:
        algo.stop()
