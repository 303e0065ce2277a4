"""The batched path on a CUDA device: env, policy and learner on the GPU (the cuda cases run where torch sees one).

CI has no GPU, so these are skipped there; they ran on the device machine a session was lent (see the
session notes). The CPU behaviour of the same code is covered by test_batched_runner and test_batched_envs.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import marl

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _ppo(env: str, env_config: dict, device: str):
    return (marl.PPOConfig().environment(env, env_config=env_config)
            .env_runners(num_envs_per_env_runner=256, rollout_fragment_length=16, device=device)
            .training(train_batch_size=256 * 16 * 3, minibatch_size=4096, num_epochs=2)
            .learners(num_gpus_per_learner=1 if device != "cpu" else 0).debugging(seed=0))


@pytest.mark.parametrize("device", [pytest.param("cpu", marks=pytest.mark.slow), pytest.param("cuda", marks=cuda)])
@pytest.mark.parametrize("env,env_config", [
    ("vmas.simple_spread", {"continuous_actions": False, "max_steps": 25}),
    pytest.param("jaxmarl.MPE_simple_spread_v3", {}, marks=pytest.mark.skipif(
        importlib.util.find_spec("jaxmarl") is None, reason="needs jaxmarl")),
])
def test_ppo_trains_with_env_policy_and_learner_on_the_device(env, env_config, device):
    algo = _ppo(env, env_config, device).build()
    try:
        runner = algo.runners.local
        assert runner.device.type == device and runner.env.device.type == device
        assert next(runner.module.parameters()).device.type == device
        assert next(algo.learners.local.module.parameters()).device.type == device
        before = algo.get_weights()["modules"]["default_policy"]
        results = [algo.train() for _ in range(2)]
        after = algo.get_weights()["modules"]["default_policy"]
    finally:
        algo.stop()
    assert results[-1]["env_steps_total"] == 2 * 256 * 16
    assert np.isfinite(results[-1]["episode_return_mean"])
    assert any(not np.array_equal(before[k], after[k]) for k in before)


@cuda
@pytest.mark.skipif(importlib.util.find_spec("jaxmarl") is None, reason="needs jaxmarl")
def test_jaxmarl_env_follows_the_torch_device_whatever_jax_defaults_to():
    """JAX on a GPU machine defaults to the GPU: a cpu env must still step on the CPU, a cuda one on the GPU."""
    from marl.envs.jaxmarl import JaxMarlEnv

    for device in ("cpu", "cuda"):
        env = JaxMarlEnv("jaxmarl.MPE_simple_spread_v3", {}, 8, 0, device, stack=True)
        obs = env.reset()
        out = env.step(torch.zeros((8, 3), dtype=torch.int64, device=device))
        assert obs.device.type == device and out.rewards.device.type == device
        restored = JaxMarlEnv("jaxmarl.MPE_simple_spread_v3", {}, 8, 0, device, stack=True)
        restored.set_state(env.get_state())
        a = torch.ones((8, 3), dtype=torch.int64, device=device)
        assert torch.equal(env.step(a).rewards, restored.step(a).rewards)
