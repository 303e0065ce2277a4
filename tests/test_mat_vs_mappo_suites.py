"""suites/mat_vs_mappo_{spread,smax}.yaml (issue 45, benchmarks/studies/mat_vs_mappo.py): every run composes with the
published settings the suites' header names, on the dict path for both sides."""

from pathlib import Path

import pytest

from marl.experiment.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("part, env, batch, epochs, lr, worlds", [
    ("spread", "mpe2.simple_spread_v3", 9600, 10, 7e-4, 128),
    ("smax", "jaxmarl.HeuristicEnemySMAX", 16000, 15, 5e-4, 32),
])
def test_the_suites_build_both_sides_with_the_published_settings(part, env, batch, epochs, lr, worlds):
    suite = load_suite(ROOT / f"suites/mat_vs_mappo_{part}.yaml")
    assert len(suite.runs) == 6 and suite.seeds == [0, 1, 2]
    assert {r.algorithm for r in suite.runs} == {"MAT", "MAPPO"}
    configs = {r.algorithm: r.config() for r in suite.runs if r.seed == 0}
    for algo, config in configs.items():
        training, runners = config.training_cfg, config.env_runners_cfg
        assert config.environment_cfg.env == env and runners.batched is False  # MAT has no batched path: both leave it
        assert (training.train_batch_size, training.minibatch_size, training.num_epochs) == (batch, batch, epochs)
        assert (training.lr, training.gamma, training.grad_clip, training.entropy_coeff) == (lr, 0.99, 10.0, 0.01)
        assert runners.num_envs_per_env_runner * runners.rollout_fragment_length == 3200  # env steps an iteration
        assert runners.num_envs_per_env_runner == worlds and training.popart is True
        assert config.stop_cfg.env_steps_total == suite.env_steps
    assert configs["MAT"].algo_name == "MAT" and configs["MAT"].training_cfg.clip_param == 0.05
    assert configs["MAPPO"].algo_name == "MAPPO" and configs["MAPPO"].training_cfg.clip_param == 0.2
    assert configs["MAPPO"].training_cfg.model == {"hiddens": [64, 64], "activation": "relu"}
