"""`learners.compile_loss`: each parameter group's loss through torch.compile gives the eager update's numbers, says
that it ran, and where compiling fails warns in one line and runs the eager loss."""

from __future__ import annotations

import functools
import logging

import pytest
import torch

import marl
from marl.learners import compiled, learner as learner_module
from marl.learners.learner import Learner
from marl.runtime.run_loop import train_run
from marl.runners import EnvRunner


def ppo_config(compile_loss: bool):
    return (marl.PPOConfig().environment("CartPole-v1")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=64)
            .training(train_batch_size=128, minibatch_size=64, num_epochs=2, model={"hiddens": [16, 16]})
            .learners(compile_loss=compile_loss).debugging(seed=3))


def batch_and_specs():
    runner = EnvRunner(ppo_config(False), 0)
    try:
        return runner.sample().batch, runner.specs
    finally:
        runner.stop()


@pytest.mark.slow  # one compilation of the PPO loss, forward and backward: 15-60 s here
def test_compiled_loss_updates_like_the_eager_loss():
    batch, specs = batch_and_specs()
    eager, compiled_learner = Learner(ppo_config(False), specs), Learner(ppo_config(True), specs)
    compiled_learner.module.set_state(eager.module.get_state())
    assert compiled_learner.groups["default_policy"][0].loss is not eager.groups["default_policy"][0].loss
    for _ in range(2):
        a, b = eager.update(batch)["default_policy"], compiled_learner.update(batch)["default_policy"]
        for key in ("policy_loss", "vf_loss", "entropy"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key
        assert b["loss_compiled"] == 1.0 and "loss_compiled" not in a
    for (name, p), q in zip(eager.module.named_parameters(), compiled_learner.module.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=name)


def failing_backend(graph, example_inputs):
    raise RuntimeError("no C++ compiler on this machine")


def test_a_loss_that_does_not_compile_warns_once_and_updates_eagerly(monkeypatch, caplog, capsys):
    """A backend that fails (as inductor does without a C++ compiler): one warning line naming the policy, group
    and cause, no traceback, and from then on the eager loss: the same weights, bit for bit, as an eager learner's;
    the update's result says the loss did not run compiled."""
    monkeypatch.setattr(learner_module, "compiled_losses", functools.partial(compiled.compiled_losses,
                                                                             backend=failing_backend))
    batch, specs = batch_and_specs()
    eager, fallen = Learner(ppo_config(False), specs), Learner(ppo_config(True), specs)
    fallen.module.set_state(eager.module.get_state())
    with caplog.at_level(logging.WARNING, logger="marl.learners.compiled"):
        for _ in range(2):
            a, b = eager.update(batch)["default_policy"], fallen.update(batch)["default_policy"]
            assert b["loss_compiled"] == 0.0 and "loss_compiled" not in a
    warnings = [r.getMessage() for r in caplog.records if r.name == "marl.learners.compiled"]
    assert len(warnings) == 1, warnings
    assert "policy 'default_policy' group 'default'" in warnings[0] and "no C++ compiler" in warnings[0]
    assert "\n" not in warnings[0] and "Traceback" not in capsys.readouterr().err
    for (name, p), q in zip(eager.module.named_parameters(), fallen.module.parameters()):
        assert torch.equal(q, p), name


def test_an_error_of_the_loss_itself_is_raised_not_hidden():
    """Only dynamo's and the backend's failures fall back: a loss that raises raises through the compiled loss."""
    def broken(module, minibatch, cfg, targets):
        return minibatch["missing"], {}

    loss = compiled.CompiledLoss(broken, "policy 'p' group 'g'", backend=failing_backend)
    with pytest.raises(KeyError, match="missing"):
        loss(torch.nn.Linear(1, 1), {"obs": torch.zeros(2)}, None, {})


def test_the_run_says_the_losses_are_compiled_and_its_results_whether_they_ran(monkeypatch, tmp_path):
    monkeypatch.setattr(learner_module, "compiled_losses", functools.partial(compiled.compiled_losses,
                                                                             backend=failing_backend))
    lines, results = [], []
    train_run(ppo_config(True).stopping(iterations=1), tmp_path, echo=lines.append, progress=results.append)
    assert any(line.startswith("learner losses: torch.compile (learners.compile_loss)") for line in lines), lines
    assert results[-1]["losses/default_policy/loss_compiled"] == 0.0
