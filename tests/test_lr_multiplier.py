"""`learners.lr_multiplier`: a piecewise-linear factor over the run's env steps on every parameter group's
learning rate (JaxMARL's ANNEAL_LR, RLlib's lr schedules), set anew at each update from the run's counter."""

from __future__ import annotations

import pytest
import torch

import marl
from marl.data import MultiAgentBatch
from marl.errors import ConfigError


def _rates(learner) -> dict[str, list[float]]:
    return {f"{pid}/{name}": [g["lr"] for g in opt.param_groups]
            for pid, opts in learner.optimizers.items() for name, opt in opts.items()}


def test_every_group_gets_its_own_rate_times_the_factor_at_the_runs_env_steps():
    algo = (marl.SACConfig().environment("Pendulum-v1")
            .training(actor_lr=3e-4, critic_lr=1e-3, alpha_lr=2e-3)
            .learners(lr_multiplier=[[0, 1.0], [100, 0.5], [300, 0.0]]).build())
    try:
        learner = algo.learners.local
        base = {"default_policy/actor": 3e-4, "default_policy/critic": 1e-3, "default_policy/alpha": 2e-3}
        for steps, factor in [(0, 1.0), (50, 0.75), (100, 0.5), (200, 0.25), (300, 0.0), (10_000, 0.0)]:
            learner.update(MultiAgentBatch({}, 0), (), steps)  # no rows: only the rates are set
            rates = _rates(learner)
            assert set(rates) == set(base)
            for key, lr in base.items():
                assert rates[key] == pytest.approx([lr * factor]), (steps, key, rates[key])
    finally:
        algo.stop()


def test_without_a_multiplier_the_rates_stay_as_configured():
    algo = marl.PPOConfig().environment("CartPole-v1").training(lr=1e-3, train_batch_size=200, minibatch_size=100).build()
    try:
        algo.train()
        assert _rates(algo.learners.local) == {"default_policy/default": [1e-3]}
    finally:
        algo.stop()


def test_a_rate_annealed_to_zero_stops_training():
    """Past the schedule's zero the weights stop moving (Adam steps with lr 0); before it they move."""
    algo = (marl.PPOConfig().environment("CartPole-v1")
            .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=200)
            .training(train_batch_size=200, minibatch_size=100, num_epochs=2)
            .learners(lr_multiplier=[[0, 1.0], [400, 0.0]]).build())
    try:
        def weights():
            return {k: v.clone() for k, v in algo.learners.local.module["default_policy"].state_dict().items()}

        before = weights()
        assert algo.train()["env_steps_total"] == 200  # its update at 200 env steps: factor 0.5
        after_first = weights()
        assert any(not torch.equal(before[k], after_first[k]) for k in before)
        assert algo.train()["env_steps_total"] == 400  # its update at 400: factor 0
        after_second = weights()
        assert all(torch.equal(after_first[k], after_second[k]) for k in before)
    finally:
        algo.stop()


@pytest.mark.parametrize("value, reason", [
    ([[100, 1.0], [50, 0.0]], "must have env steps >= 0 in increasing order"),
    ([[0, -0.5]], "must have values >= 0 (factors)"),
    ([], "must have at least one [env_step, value] pair"),
    ([[0, 1.0, 2]], "must be a list of [env_step, value] pairs"),
    ("linear", "must be list | None"),
])
def test_a_bad_multiplier_is_one_line_naming_the_key(value, reason):
    with pytest.raises(ConfigError) as err:
        marl.PPOConfig().learners(lr_multiplier=value)
    text = str(err.value)
    assert text.startswith("'learners.lr_multiplier' ") and reason in text and "\n" not in text, text
