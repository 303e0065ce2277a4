"""The learner's device: CPU by default, CUDA with `learners.num_gpus_per_learner` > 0, one clear error without CUDA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marl import PPOConfig
from marl.errors import ConfigError
from marl.learners import device as dev
from marl.learners import learner as learner_mod
from marl.learners.distributed import process_group_backend
from marl.learners.group import check_gpu_resources


def ppo_cartpole(**learners):
    return (PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
            .training(train_batch_size=64, minibatch_size=16, num_epochs=2).learners(**learners).debugging(seed=0))


def test_the_cpu_is_the_default():
    assert dev.learner_device(0) == torch.device("cpu")
    t = torch.arange(4)
    assert dev.to_device({"x": t}, torch.device("cpu"))["x"] is t  # no copy on the CPU
    assert process_group_backend(False) == "gloo"


def test_gpus_without_cuda_are_one_config_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"'learners.num_gpus_per_learner' = 1 asks for a GPU.*set it to 0"):
        ppo_cartpole(num_gpus_per_learner=1).validate()
    with pytest.raises(ConfigError, match="num_gpus_per_learner"):
        dev.learner_device(0.5)
    with pytest.raises(ConfigError, match=">= 0"):
        ppo_cartpole(num_gpus_per_learner=-1)


def test_a_gpu_learner_uses_the_current_cuda_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert dev.learner_device(1) == torch.device("cuda", 0)


def test_learner_actors_asking_for_more_gpus_than_ray_has_fail_at_once(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0})
    with pytest.raises(ConfigError, match="2 GPUs, but the Ray cluster has 0"):
        check_gpu_resources(ppo_cartpole(num_learners=2, num_gpus_per_learner=1))
    check_gpu_resources(ppo_cartpole(num_learners=2))  # CPU learners ask for nothing


def test_each_update_moves_its_batch_once_not_per_minibatch(monkeypatch):
    calls = []
    real = learner_mod.to_device

    def counting(arrays, device):
        calls.append(sorted(arrays))
        return real(arrays, device)

    monkeypatch.setattr(learner_mod, "to_device", counting)
    algo = ppo_cartpole().build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["losses/default_policy/num_sgd_steps"] == 8  # 2 epochs x 4 minibatches ...
    assert len(calls) == 1  # ... from one transfer


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_ppo_learns_on_the_gpu_and_hands_numpy_weights_to_runners():
    algo = ppo_cartpole(num_gpus_per_learner=1).build()
    try:
        assert next(algo.learners.local.module.parameters()).is_cuda
        before = algo.get_weights()["modules"]["default_policy"]
        algo.train()
        after = algo.get_weights()["modules"]["default_policy"]
    finally:
        algo.stop()
    assert all(isinstance(v, np.ndarray) for v in after.values())
    assert any(not np.array_equal(before[k], after[k]) for k in before)
