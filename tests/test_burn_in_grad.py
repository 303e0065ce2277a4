"""R2D2's burn-in without gradients (Kapturowski et al. 2019), `training.burn_in_grad`, a `PolicyPlan` field: by
default the state the burn-in steps warm up is detached where each replayed row's TD loss begins, so no gradient
reaches the burn-in steps; `burn_in_grad: true` lets gradients flow back through them (the earlier behaviour)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.algorithms.dqn.loss import dqn_loss
from marl.config import ConfigError
from marl.data import sample_batch as sb
from marl.modules.recurrent_q import RecurrentJointQ, RecurrentQ
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS
from marl.replay.sequences import DETACH_AT, SEQ_MASK, first_loss_steps, state_start_column
from tests.test_recurrent import MEMORY_ENV, TWO_POLICIES

BURN = [0, 1, 2, 3]  # burn-in steps of each replayed row (a row starting its episode has none)
LENGTH, OBS, CELL = 6, 4, 8


class Cfg:
    gamma, double_q, td_error_loss, n_step = 0.99, True, "huber", 2


def _rows(seed: int = 0) -> dict[str, torch.Tensor]:
    """Replayed sequence rows as `agent_sequences` lays them out: burn-in steps first (seq_mask 0), then real steps."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.arange(LENGTH)
    mask = ((steps >= torch.tensor(BURN)[:, None]) & (steps < LENGTH - 1)).float()  # one padded step at the end
    b = len(BURN)
    return {
        sb.OBS: torch.randn(b, LENGTH, OBS, generator=g), sb.NEXT_OBS: torch.randn(b, LENGTH, OBS, generator=g),
        sb.ACTIONS: torch.randint(0, 3, (b, LENGTH), generator=g), sb.REWARDS: torch.randn(b, LENGTH, generator=g),
        sb.TERMINATEDS: torch.zeros(b, LENGTH, dtype=torch.bool), SEQ_MASK: mask,
        DISCOUNTS: torch.ones(b), REPLAY_WEIGHTS: torch.ones(b), state_start_column("h"): torch.randn(b, CELL, generator=g),
    }


def _q_module() -> RecurrentQ:
    torch.manual_seed(0)
    return RecurrentQ(gym.spaces.Box(-1, 1, (OBS,)), gym.spaces.Discrete(3),
                      {"hiddens": [16], "recurrent": "gru", "cell_size": CELL, "max_seq_len": LENGTH})


def _loss_and_grads(module, rows: dict, detached: bool):
    """DQN's sequence loss with the learner's column for R2D2's burn-in (detached) or without it; the gradients
    of the stored states and the observations are kept for the test."""
    batch = {k: v.clone().requires_grad_(k in (state_start_column("h"), sb.OBS, sb.NEXT_OBS)) for k, v in rows.items()}
    if detached:
        batch[DETACH_AT] = first_loss_steps(batch[SEQ_MASK])
    module.zero_grad()
    loss, _ = dqn_loss(module, batch, Cfg, target=module)
    loss.backward()
    params = torch.cat([p.grad.flatten() for p in module.parameters()])
    return loss.detach(), batch[state_start_column("h")].grad, batch[sb.NEXT_OBS].grad, params


def test_first_loss_steps_are_where_each_rows_burn_in_ends():
    np.testing.assert_array_equal(first_loss_steps(_rows()[SEQ_MASK]).numpy(), BURN)


def test_no_gradient_reaches_the_burn_in_steps_unless_asked():
    module, rows = _q_module(), _rows()
    loss, h0_grad, next_obs_grad, params = _loss_and_grads(module, rows, detached=True)
    loss_through, h0_through, next_obs_through, params_through = _loss_and_grads(module, rows, detached=False)
    torch.testing.assert_close(loss, loss_through, rtol=0, atol=1e-6)  # the same values: only the gradients differ
    # R2D2's: the state entering each row's first trained step is detached (a row without burn-in: its stored
    # state), so neither the stored states nor the burn-in observations get a gradient (seq position p >= 1 is
    # next_obs[p - 1]: the burn-in of a row with B steps is next_obs[:B - 1]); the trained steps get theirs
    assert torch.all(h0_grad == 0)
    for row, burn in enumerate(BURN):
        assert torch.all(next_obs_grad[row, : max(burn - 1, 0)] == 0)
        assert next_obs_grad[row, burn : LENGTH - 1].abs().sum() > 0
    # gradients through the burn-in: every row's stored state and the burn-in observations get one
    assert torch.all(h0_through.abs().sum(-1) > 0)
    for row, burn in enumerate(BURN):
        assert torch.all(next_obs_through[row, : max(burn - 1, 0)].abs().sum(-1) > 0)
    assert not torch.allclose(params, params_through)  # the parameter update differs


def test_vdn_qmix_agents_detach_per_row_for_every_agent():
    torch.manual_seed(0)
    module = RecurrentJointQ(gym.spaces.Box(-1, 1, (OBS,)), gym.spaces.Discrete(3),
                             {"hiddens": [16], "recurrent": "gru", "cell_size": CELL, "agent_indices": [0, 1], "mixer": "vdn"})
    rows = _rows()
    h0 = torch.randn(len(BURN), 2, CELL)
    grads = {}
    for mode, cut in (("detached", first_loss_steps(rows[SEQ_MASK])), ("through", None)):
        joint = torch.stack([rows[sb.OBS], rows[sb.NEXT_OBS]], dim=2).requires_grad_(True)  # [B, T, 2 agents, obs]
        q = module.agent_q_sequences(joint, {"h": h0}, detach_at=cut)
        (q.sum((-1, -2)) * rows[SEQ_MASK]).sum().backward()  # the trained steps' outputs only
        grads[mode] = joint.grad.abs().sum(-1)  # [B, T, agents]
    for row, burn in enumerate(BURN):  # per row, for both agents
        assert torch.all(grads["detached"][row, :burn] == 0) and torch.all(grads["detached"][row, burn : LENGTH - 1] > 0)
        assert torch.all(grads["through"][row, : LENGTH - 1] > 0)


def test_the_key_is_checked_and_reaches_each_policys_plan():
    assert marl.DQNConfig().multi_agent(policies=["p"]).plan_for("p").burn_in_grad is False  # the paper's
    assert marl.DQNConfig().training(burn_in_grad=True).plan_for("default_policy").burn_in_grad is True
    with pytest.raises(ConfigError, match="'training.burn_in_grad' must be bool, got str 'no'"):
        marl.QMIXConfig().training(burn_in_grad="no")
    mixed = marl.MixedConfig().environment(MEMORY_ENV).multi_agent(**TWO_POLICIES).training(algorithms={
        "p0": {"algo": "DQN", "burn_in": 2, "burn_in_grad": True}, "p1": {"algo": "DQN", "burn_in": 2}})
    assert mixed.plan_for("p0").burn_in_grad is True and mixed.plan_for("p1").burn_in_grad is False


def _trained(burn_in: int, burn_in_grad: bool) -> dict:
    config = (marl.DQNConfig().environment(MEMORY_ENV).multi_agent(**TWO_POLICIES)
              .training(model={"hiddens": [16], "recurrent": "gru", "cell_size": 8, "max_seq_len": 3}, burn_in=burn_in,
                        burn_in_grad=burn_in_grad, num_steps_sampled_before_learning_starts=16, min_env_steps_per_iteration=64)
              .debugging(seed=1))
    algo = config.build()
    try:
        for _ in range(2):
            result = algo.train()
        assert result["losses/p0/num_sgd_steps"] > 0 and np.isfinite(result["losses/p0/loss"])
        return algo.get_weights()["modules"]["p0"]
    finally:
        algo.stop()


def test_the_learner_follows_the_plan_and_the_default_trains():
    """The learner detaches where the plan says: with burn-in the two modes train apart; without it they are one."""
    default, through = _trained(2, False), _trained(2, True)
    assert any(not np.array_equal(default[k], through[k]) for k in default)
    plain, plain_through = _trained(0, False), _trained(0, True)
    for key, value in plain.items():
        np.testing.assert_array_equal(plain_through[key], value, err_msg=key)
