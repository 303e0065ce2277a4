"""A2C: the loss by hand, one gradient step per batch, the command line, CartPole with the defaults (slow)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
import yaml

import marl
from marl.algorithms import config_class
from marl.algorithms.a2c.loss import a2c_loss
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.modules import ActorCriticMLP
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def test_a2c_is_found_with_its_defaults():
    from marl import A2CConfig

    assert config_class("a2c") is A2CConfig and "A2CConfig" in marl.__all__
    cfg = A2CConfig()
    assert cfg.capabilities.mixed_family == "on_policy"
    assert cfg.sample_columns == frozenset({sb.VF_PREDS, sb.BOOTSTRAP_VALUE})
    # one sampling round of the default runner is one train batch
    assert cfg.env_runners_cfg.num_envs_per_env_runner * cfg.env_runners_cfg.rollout_fragment_length == cfg.training_cfg.train_batch_size


def test_loss_by_hand():
    torch.manual_seed(0)
    module = ActorCriticMLP(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), {"hiddens": [8]})
    batch = {
        sb.OBS: torch.randn(4, 3),
        sb.ACTIONS: torch.tensor([0, 1, 1, 0]),
        sb.ADVANTAGES: torch.tensor([1.0, -0.5, 2.0, 0.25]),
        sb.VALUE_TARGETS: torch.tensor([0.5, 1.0, -1.0, 2.0]),
    }
    cfg = config_class("A2C")().training(vf_loss_coeff=0.7, entropy_coeff=0.1).training_cfg
    total, stats = a2c_loss(module, batch, cfg)

    logp_all = torch.log_softmax(module.pi(batch[sb.OBS]), dim=-1)
    logp = logp_all[torch.arange(4), batch[sb.ACTIONS]]
    policy_loss = -(logp * batch[sb.ADVANTAGES]).mean()
    values = module.vf(batch[sb.OBS]).squeeze(-1)
    vf_loss = 0.5 * ((values - batch[sb.VALUE_TARGETS]) ** 2).mean()
    entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
    torch.testing.assert_close(stats["policy_loss"], policy_loss)
    torch.testing.assert_close(stats["vf_loss"], vf_loss)
    torch.testing.assert_close(stats["entropy"], entropy)
    torch.testing.assert_close(total, policy_loss + 0.7 * vf_loss - 0.1 * entropy)
    total.backward()  # the actor and the critic both get gradients
    assert all(p.grad is not None for p in module.parameters())


def test_advantages_are_n_step_returns_with_lambda_one():
    cfg = config_class("A2C")().training(gamma=0.5, gae_lambda=1.0, standardize_advantages=False).training_cfg
    batch = SampleBatch({
        sb.REWARDS: np.array([1.0, 2.0, 3.0, 1.0], np.float32),
        sb.VF_PREDS: np.array([0.0, 0.0, 0.0, 0.5], np.float32),
        sb.TERMINATEDS: np.array([False, False, False, True]),
        sb.SEGMENT_END: np.array([False, False, True, True]),
        sb.BOOTSTRAP_VALUE: np.array([0.0, 0.0, 2.0, 0.0], np.float32),
    })
    for connector in config_class("A2C")().algorithm_parts().learner_connectors(cfg):
        batch = connector(batch)
    # piece 1 bootstraps V(s')=2 after its last row: 3 + 0.5*2 = 4, 2 + 0.5*4 = 4, 1 + 0.5*4 = 3; piece 2 terminates
    np.testing.assert_allclose(batch[sb.VALUE_TARGETS], [3.0, 4.0, 4.0, 1.0])
    np.testing.assert_allclose(batch[sb.ADVANTAGES], [3.0, 4.0, 4.0, 0.5])


def test_one_gradient_step_per_train_batch():
    algo = config_class("A2C")().environment("CartPole-v1").training(min_env_steps_per_iteration=512).debugging(seed=0).build()
    try:
        r = algo.train()
    finally:
        algo.stop()
    assert r["env_steps_total"] == 512  # 4 updates of one 128-step sampling round each, one gradient step each
    assert r["losses/default_policy/num_sgd_steps"] == 4 and r["losses/default_policy/agent_steps_trained"] == 512
    for key in ("policy_loss", "vf_loss", "entropy"):
        assert math.isfinite(r[f"losses/default_policy/{key}"])


def test_cli_trains_a2c_without_yaml(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "marl.cli", "train", "--algo", "A2C", "--env", "CartPole-v1", "stop.iterations=1", "--output", str(tmp_path / "run")],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_S,
    )
    assert p.returncode == 0, p.stderr
    assert "stopped: iterations 1 >= 1" in p.stdout
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["algo"] == "A2C"
    assert len((tmp_path / "run" / "result.jsonl").read_text().splitlines()) == 1
