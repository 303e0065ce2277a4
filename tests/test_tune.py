"""Ray Tune: a scenario as a Tune trainable; a 2-trial grid over training.lr on CartPole."""

from __future__ import annotations

from pathlib import Path

import pytest

from marl.algorithms import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_resolve_config_applies_dotted_and_nested_overrides():
    from marl import PPOConfig
    from marl.tune import resolve_config

    cfg = resolve_config(str(ROOT / "scenarios/cartpole_ppo.yaml"), {"training.lr": 1e-3, "env_runners": {"num_envs_per_env_runner": 2}})
    assert cfg.training_cfg.lr == 1e-3 and cfg.env_runners_cfg.num_envs_per_env_runner == 2
    assert cfg.env_runners_cfg.rollout_fragment_length == 256  # the rest of the scenario is kept
    base = PPOConfig().environment("CartPole-v1").training(num_epochs=3)
    cfg = resolve_config(base, {"training.lr": 5e-4})
    assert cfg.training_cfg.lr == 5e-4 and cfg.training_cfg.num_epochs == 3 and base.training_cfg.lr == 3e-4
    with pytest.raises(ConfigError, match="training.lrr"):
        resolve_config(base, {"training.lrr": 1.0})


def test_trainable_rejects_a_bad_scenario_before_tune_starts():
    from marl.tune import trainable

    with pytest.raises(ConfigError, match="does not exist"):
        trainable(ROOT / "scenarios/nope.yaml")


def test_two_trial_lr_sweep_on_cartpole(ray_session, tmp_path):
    from ray import tune

    from marl.tune import CHECKPOINT_NAME, trainable

    tuner = tune.Tuner(
        trainable(ROOT / "scenarios/cartpole_ppo.yaml"),
        param_space={
            "training.lr": tune.grid_search([1e-3, 1e-4]),
            "training.train_batch_size": 256,
            "env_runners": {"num_envs_per_env_runner": 2, "rollout_fragment_length": 64},
            "evaluation": {"evaluation_interval": 2, "evaluation_duration": 2},  # results with per-episode lists
        },
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="sweep", stop={"training_iteration": 2}, verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    )
    grid = tuner.fit()
    assert len(grid) == 2 and not grid.errors
    assert sorted(r.config["training.lr"] for r in grid) == [1e-4, 1e-3]
    for r in grid:
        assert r.metrics["training_iteration"] == 2 and r.metrics["env_steps_total"] == 512  # 2 x train_batch_size
        assert r.metrics["iteration"] == 2 and "policy_return_mean/default_policy" in r.metrics
        assert len(r.metrics["evaluation/episode_returns"]) == 2  # Tune (and its loggers) take the lists as they are
        assert (Path(r.checkpoint.path) / CHECKPOINT_NAME / "manifest.json").is_file()
    frame = grid.get_dataframe()
    assert len(frame) == 2 and "episode_return_mean" in frame.columns
