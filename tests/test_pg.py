"""PG (REINFORCE): returns-to-go and the loss by hand, whole episodes, the command line, CartPole (slow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import marl
from marl.algorithms import config_class
from marl.algorithms.pg.loss import pg_loss
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.modules import ActorCriticMLP
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def test_pg_is_found_with_its_defaults():
    from marl import PGConfig

    assert config_class("pg") is PGConfig and "PGConfig" in marl.__all__
    cfg = PGConfig()
    assert cfg.sample_columns == frozenset()  # no values, no log-probs
    assert cfg.env_runners_cfg.batch_mode == "complete_episodes" and cfg.capabilities.mixed_family == "on_policy"


def test_returns_to_go_by_hand():
    cfg = config_class("PG")().training(gamma=0.5, standardize_returns=False).training_cfg
    batch = SampleBatch({
        sb.REWARDS: np.array([1.0, 2.0, 4.0, 3.0, 1.0], np.float32),
        sb.SEGMENT_END: np.array([False, False, True, False, True]),
        sb.TERMINATEDS: np.array([False, False, True, False, False]),
    })
    for connector in config_class("PG")().algorithm_parts().learner_connectors(cfg):
        batch = connector(batch)
    # episode 1: 4, 2 + 0.5*4 = 4, 1 + 0.5*4 = 3; piece 2 ends without a bootstrap (no critic): 1, 3 + 0.5*1
    np.testing.assert_allclose(batch[sb.ADVANTAGES], [3.0, 4.0, 4.0, 3.5, 1.0])
    standardized = config_class("PG")().training(gamma=0.5).training_cfg
    batch = SampleBatch({k: batch[k] for k in (sb.REWARDS, sb.SEGMENT_END, sb.TERMINATEDS)})
    for connector in config_class("PG")().algorithm_parts().learner_connectors(standardized):
        batch = connector(batch)
    g = np.array([3.0, 4.0, 4.0, 3.5, 1.0])
    np.testing.assert_allclose(batch[sb.ADVANTAGES], (g - g.mean()) / (g.std() + 1e-8), rtol=1e-5)


def test_loss_by_hand():
    torch.manual_seed(0)
    module = ActorCriticMLP(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(3), {"hiddens": [8]})
    batch = {
        sb.OBS: torch.randn(4, 3),
        sb.ACTIONS: torch.tensor([0, 2, 1, 0]),
        sb.ADVANTAGES: torch.tensor([1.0, -0.5, 2.0, 0.25]),
    }
    cfg = config_class("PG")().training(entropy_coeff=0.1).training_cfg
    total, stats = pg_loss(module, batch, cfg)

    logp_all = torch.log_softmax(module.pi(batch[sb.OBS]), dim=-1)
    policy_loss = -(logp_all[torch.arange(4), batch[sb.ACTIONS]] * batch[sb.ADVANTAGES]).mean()
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
    torch.testing.assert_close(stats["policy_loss"], policy_loss)
    torch.testing.assert_close(total, policy_loss - 0.1 * entropy)
    total.backward()  # no critic in the loss: the value head gets no gradient
    assert all(p.grad is not None for p in module.pi.parameters()) and all(p.grad is None for p in module.vf.parameters())


def test_one_gradient_step_per_batch_of_whole_episodes():
    algo = config_class("PG")().environment("CartPole-v1").training(train_batch_size=256).debugging(seed=0).build()
    try:
        r = algo.train()
        batch = algo.runners.local.sample()["default_policy"]
    finally:
        algo.stop()
    assert r["env_steps_total"] >= 256 and r["losses/default_policy/num_sgd_steps"] == 1
    assert r["losses/default_policy/agent_steps_trained"] == r["env_steps_total"]
    # complete_episodes: every piece of a sampled batch ends its episode
    ends = batch[sb.SEGMENT_END].astype(bool)
    assert ends[-1] and np.all(batch[sb.TERMINATEDS][ends] | batch[sb.TRUNCATEDS][ends])


def test_pg_samples_with_no_value_pass_and_no_log_probs():
    algo = config_class("PG")().environment("CartPole-v1").training(train_batch_size=64).debugging(seed=0).build()
    try:
        runner = algo.runners.local
        assert runner.module["default_policy"].vf is None  # a policy-only network: nothing computes values
        batch = runner.sample()["default_policy"]
    finally:
        algo.stop()
    assert not {sb.VF_PREDS, sb.BOOTSTRAP_VALUE, sb.ACTION_LOGP} & set(batch.columns)


def test_cli_trains_pg_without_yaml(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "marl.cli", "train", "--algo", "PG", "--env", "CartPole-v1", "stop.iterations=1", "--output", str(tmp_path / "run")],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_S,
    )
    assert p.returncode == 0, p.stderr
    assert "stopped: iterations 1 >= 1" in p.stdout
