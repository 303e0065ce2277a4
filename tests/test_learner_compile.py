"""`learners.compile_loss`: each parameter group's loss through torch.compile gives the eager update's numbers."""

from __future__ import annotations

import pytest
import torch

import marl
from marl.learners.learner import Learner
from marl.runners import EnvRunner


def ppo_config(compile_loss: bool):
    return (marl.PPOConfig().environment("CartPole-v1")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=64)
            .training(train_batch_size=128, minibatch_size=64, num_epochs=2, model={"hiddens": [16, 16]})
            .learners(compile_loss=compile_loss).debugging(seed=3))


@pytest.mark.slow  # one compilation of the PPO loss, forward and backward: 15-60 s here
def test_compiled_loss_updates_like_the_eager_loss():
    runner = EnvRunner(ppo_config(False), 0)
    batch, specs = runner.sample().batch, runner.specs
    runner.stop()
    eager, compiled = Learner(ppo_config(False), specs), Learner(ppo_config(True), specs)
    compiled.module.set_state(eager.module.get_state())
    assert compiled.groups["default_policy"][0].loss is not eager.groups["default_policy"][0].loss
    for _ in range(2):
        a, b = eager.update(batch)["default_policy"], compiled.update(batch)["default_policy"]
        for key in ("policy_loss", "vf_loss", "entropy"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key
    for (name, p), q in zip(eager.module.named_parameters(), compiled.module.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=name)
