"""The MaMuJoCo task group (marl/conf/task/mamujoco): every task composes with HAPPO, MAPPO and HASAC and builds,
its values are HARL's tuned configs' (the files' comments name them), and the two MaMuJoCo suites load with their
per-algorithm overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl.config.compose import compose, group_options
from marl.experiment.suite import load_suite

pytest.importorskip("gymnasium_robotics", reason="gymnasium-robotics not installed: pip install 'marl[mamujoco]'")
pytest.importorskip("mujoco", reason="mujoco not installed: pip install 'marl[mamujoco]'")

ROOT = Path(__file__).resolve().parent.parent
TASKS = ["halfcheetah_2x3", "halfcheetah_6x1", "walker2d_2x3", "ant_2x4", "ant_4x2"]
PAIRS = [(algo, task) for task in TASKS for algo in ("happo", "mappo", "hasac")]


def training(algo: str, task: str, *items: str):
    return compose(None, [f"algorithm={algo}", f"task=mamujoco/{task}", *items]).config().resolved().training_cfg


def test_marl_configs_lists_the_tasks():
    assert {f"mamujoco/{t}" for t in TASKS} <= set(group_options("task"))
    assert "mamujoco/_family" not in group_options("task")


@pytest.mark.parametrize("algo, task", PAIRS, ids=[f"{a}-{t}" for a, t in PAIRS])
def test_a_task_composes_with_the_algorithm_and_builds(algo, task):
    items = [f"algorithm={algo}", f"task=mamujoco/{task}", "loggers.tensorboard=false",
             "env_runners.num_envs_per_env_runner=2", "training.replay_capacity=1000" if algo == "hasac" else "debugging.seed=0"]
    config = compose(None, items).config(validate=True)
    assert config.algo_name == algo.upper() and config.environment_cfg.env.startswith("mamujoco.")
    config.build().stop()


def test_the_on_policy_settings_are_harls():
    happo = training("happo", "halfcheetah_2x3")  # HalfCheetah-v2-2x3/happo: 20 threads x 200 steps, 1 minibatch
    assert (happo.train_batch_size, happo.minibatch_size, happo.num_epochs) == (8000, 8000, 15)
    assert (happo.lr, happo.clip_param, happo.vf_clip_param, happo.entropy_coeff) == (5e-4, 0.05, 0.05, 0.01)
    assert (happo.gamma, happo.gae_lambda, happo.vf_loss_coeff, happo.grad_clip, happo.popart) == (0.99, 0.95, 1.0, 10.0, True)
    assert happo.model == {"hiddens": [128, 128, 128], "activation": "relu", "initial_log_std": -1.0}
    assert training("mappo", "halfcheetah_6x1").train_batch_size == 24000  # 4,000 env steps x 6 agents
    walker = training("mappo", "walker2d_2x3")  # Walker2d-v2-2x3: 5 epochs, 2 minibatches an agent, lr 1e-3
    assert (walker.minibatch_size, walker.num_epochs, walker.lr, walker.entropy_coeff) == (2000, 5, 1e-3, 0.0)
    ant = training("happo", "ant_4x2")  # Ant-v2-4x2: clip 0.1, 4 agents
    assert (ant.train_batch_size, ant.clip_param, ant.num_epochs) == (16000, 0.1, 5)
    assert training("hatrpo", "halfcheetah_2x3").kl_threshold == 0.01


def test_the_off_policy_settings_are_harls():
    hasac = training("hasac", "halfcheetah_2x3")  # HalfCheetah-v2-2x3/hasac: 50 updates of 1,000 per 1,000 env steps
    assert (hasac.train_batch_size, hasac.training_intensity, hasac.n_step, hasac.replay_capacity) == (1000, 50, 10, 10**6)
    assert (hasac.actor_lr, hasac.critic_lr, hasac.alpha_lr, hasac.initial_alpha) == (1e-3, 1e-3, 3e-4, 1.0)
    assert (hasac.num_steps_sampled_before_learning_starts, hasac.critic_state) == (10000, "global_state")
    walker = training("hasac", "walker2d_2x3")  # a fixed temperature of 0.2, 20-step targets
    assert (walker.n_step, walker.actor_lr, walker.initial_alpha, walker.alpha_lr) == (20, 5e-4, 0.2, 0.0)
    ant = training("hasac", "ant_2x4")
    assert (ant.train_batch_size, ant.n_step, ant.critic_lr) == (2200, 5, 3e-4)


def test_the_suites_load_with_their_algorithms_overrides():
    happo = load_suite(ROOT / "suites/mamujoco_happo.yaml")
    assert len(happo.runs) == 18 and {r.algorithm for r in happo.runs} == {"HAPPO", "HATRPO", "MAPPO"}
    hatrpo = next(r for r in happo.runs if r.task == "walker2d_2x3" and r.algorithm == "HATRPO").config()
    t = hatrpo.training_cfg
    assert (t.num_epochs, t.minibatch_size, t.lr, t.vf_clip_param) == (5, 8000, 5e-4, 0.2)
    assert hatrpo.learners_cfg.lr_multiplier is None and hatrpo.stop_cfg.env_steps_total == 1_000_000
    hasac = load_suite(ROOT / "suites/mamujoco_hasac.yaml")
    assert len(hasac.runs) == 18 and {r.algorithm for r in hasac.runs} == {"HASAC", "MASAC", "MADDPG"}
    maddpg = next(r for r in hasac.runs if r.algorithm == "MADDPG").config()
    assert (maddpg.training_cfg.shared_actor, maddpg.training_cfg.training_intensity) == (False, 100)
    assert maddpg.env_runners_cfg.num_envs_per_env_runner == 10
