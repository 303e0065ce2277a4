"""MIXED runs train SAC policies (simple_tag: predator by PPO, prey by discrete SAC); MASAC/MADDPG say no."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from marl import ConfigError
from marl.algorithms import config_from_dict
from marl.algorithms.sac.config import SACParts
from marl.algorithms.sac.workflow import polyak_per_round

SCENARIO = "scenarios/simple_tag_mixed.yaml"
SMALL = [
    "env_runners.num_envs_per_env_runner=4",
    "env_runners.rollout_fragment_length=16",
    "training.min_env_steps_per_iteration=256",
    "training.algorithms.predator.train_batch_size=256",
    "training.algorithms.predator.minibatch_size=128",
    "training.algorithms.predator.num_epochs=2",
    "training.algorithms.predator.model={hiddens: [32]}",
]
PREY = {"algo": "SAC", "train_batch_size": 32, "training_intensity": 8, "tau": 0.01,
        "num_steps_sampled_before_learning_starts": 100, "model": {"hiddens": [32]}}


def mixed(prey: dict):
    """The simple_tag MIXED scenario with the prey trained by `prey` (discrete actions)."""
    with open(SCENARIO) as f:
        scenario = yaml.safe_load(f)
    scenario["training"]["algorithms"]["prey"] = prey
    return config_from_dict(scenario, SMALL)


def test_a_mixed_run_trains_a_discrete_sac_policy_from_its_own_buffer():
    algo = mixed(PREY).build()
    try:
        learner = algo.learners.local
        assert isinstance(learner.parts["prey"], SACParts) and type(learner.module["prey"]).__name__ == "ActorQModule"
        assert list(algo.replay_buffers) == ["prey"]
        # SAC's per-update Polyak weight, compounded over the prey's updates per sampling round (64 env steps * 8 / 32)
        params = algo.workflow.graph.nodes["update_target_prey"]["params"]
        assert params["every_env_steps"] == 1 and params["tau"] == pytest.approx(polyak_per_round(0.01, 16))
        before = {k: v.copy() for k, v in algo.get_weights()["modules"]["prey"].items()}
        results = [algo.train() for _ in range(2)]
        after = algo.get_weights()["modules"]["prey"]
        assert any(not np.allclose(after[k], before[k]) for k in after)
        assert all(math.isfinite(results[-1][f"losses/prey/{g}/loss"]) for g in ("critic", "actor", "alpha"))
        assert results[-1]["counters/target_updates/prey"] >= 1
        assert any("losses/predator/clip_fraction" in r for r in results)
    finally:
        algo.stop()


def test_mixed_refuses_masac_with_one_clear_line():
    with pytest.raises(ConfigError, match="MASAC"):
        mixed({"algo": "MASAC"}).validate()
