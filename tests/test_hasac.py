"""HASAC: one actor per agent stepped in a random order each update over MASAC's centralised critics; Box and
Discrete; each actor's loss reaches its own actor only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from marl import HASACConfig
from marl.algorithms import config_from_dict
from marl.algorithms.hasac.config import HASACParts
from marl.algorithms.hasac.loss import actor_loss
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS

SMALL = ["training.num_steps_sampled_before_learning_starts=50", "training.min_env_steps_per_iteration=100",
         "training.train_batch_size=16", "training.training_intensity=4", "env_runners.num_envs_per_env_runner=2",
         "debugging.seed=0"]


def _build(continuous: bool, extra=()):
    env = {"env": "mpe2.simple_spread_v3", "env_config": {"N": 3, "continuous_actions": continuous}}
    return config_from_dict({"algo": "HASAC", "environment": env}, SMALL + list(extra)).build()


def test_update_order_puts_the_critic_first_the_actors_in_a_random_order_and_alpha_last():
    parts = HASACParts(4)
    groups = parts.param_groups(HASACConfig().training_cfg)
    assert [g.name for g in groups] == ["critic", "actor_0", "actor_1", "actor_2", "actor_3", "alpha"]
    rng = np.random.default_rng(0)
    orders = {tuple(g.name for g in parts.update_order(groups, rng)) for _ in range(30)}
    assert all(o[0] == "critic" and o[-1] == "alpha" and sorted(o[1:-1]) == [f"actor_{k}" for k in range(4)] for o in orders)
    assert len(orders) > 5  # the actors' order is drawn anew each update
    fixed = HASACParts(4, fixed_order=True)
    assert [g.name for g in fixed.update_order(groups, rng)] == [g.name for g in groups]


@pytest.mark.parametrize("continuous", [True, False], ids=["Box", "Discrete"])
def test_each_agent_has_its_own_actor_and_its_loss_reaches_only_that_actor(continuous):
    algo = _build(continuous)
    try:
        learner = algo.learners.local
        module = learner.module["default_policy"]
        assert len(module.actors) == 3
        assert [g.name for g in learner.groups["default_policy"]] == ["critic", "actor_0", "actor_1", "actor_2", "alpha"]
        before = [{k: v.clone() for k, v in a.state_dict().items()} for a in module.actors]
        result = algo.train()
        result = algo.train()
        for k in range(3):
            assert math.isfinite(result[f"losses/default_policy/actor_{k}/loss"])
            moved = module.actors[k].state_dict()
            assert any(not torch.equal(before[k][n], moved[n]) for n in moved), f"actor {k} did not learn"
        # agent 1's loss: a gradient on its actor, none on the others' or the critics
        obs = torch.randn(8, 3, module.obs_dim)
        module.zero_grad(set_to_none=True)
        loss, _ = actor_loss(module, {"obs": obs, "next_obs": obs, "actions": torch.zeros(8, 3, 2 if continuous else 1)}, None, 1)
        loss.backward()
        grads = [any(p.grad is not None and p.grad.abs().sum() > 0 for p in a.parameters()) for a in module.actors]
        assert grads == [False, True, False]
        assert all(p.grad is None for p in module.critic_parameters())
    finally:
        algo.stop()


def test_a_shared_actor_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="shared_actor.*HASAC gives each agent its own actor"):
        config_from_dict({"algo": "HASAC", "environment": {"env": "mpe2.simple_spread_v3"}}, ["training.shared_actor=true"])


@pytest.mark.parametrize("continuous", [True, False], ids=["Box", "Discrete"])
def test_actor_forwards_shared_across_the_steps_leave_the_updates_bit_identical(continuous, monkeypatch):
    """`ActorOutputs` runs each actor once per weight version on the minibatch (3n forwards an update with
    next_obs's n, not n(n + 2) + n), and the runs' weights equal, bit for bit, those of runs that recompute
    every forward, as the losses did before it."""
    from marl.algorithms.hasac import loss as hasac_loss
    from marl.modules.actor_q import apply_net

    def weights_after_training(recompute: bool):
        with monkeypatch.context() as patch:
            if recompute:
                patch.setattr(hasac_loss.ActorOutputs, "get", lambda self, module, obs, k: apply_net(module.actors[k], obs[:, k]))
            algo = _build(continuous)
            try:
                algo.train()
                algo.train()
                return {k: v.clone() for k, v in algo.learners.local.module["default_policy"].state_dict().items()}, algo
            finally:
                algo.stop()

    shared, algo = weights_after_training(recompute=False)
    recomputed, _ = weights_after_training(recompute=True)
    assert shared.keys() == recomputed.keys()
    assert all(torch.equal(shared[k], recomputed[k]) for k in shared)
    learner = algo.learners.local
    module = learner.module["default_policy"]
    calls = []
    hooks = [actor.register_forward_hook(lambda *_: calls.append(1)) for actor in module.actors]
    try:
        rows = {sb.OBS: torch.randn(16, 3, module.obs_dim), sb.NEXT_OBS: torch.randn(16, 3, module.obs_dim),
                sb.REWARDS: torch.zeros(16), sb.TERMINATEDS: torch.zeros(16), DISCOUNTS: torch.full((16,), 0.99),
                REPLAY_WEIGHTS: torch.ones(16),
                sb.ACTIONS: torch.rand(16, 3, 5) * 2 - 1 if continuous else torch.randint(0, 5, (16, 3))}
        for group in learner.parts["default_policy"].update_order(learner.groups["default_policy"], learner.rng):
            learner._step_group("default_policy", group, module, rows, learner.train_cfgs["default_policy"],
                                learner.targets["default_policy"])
    finally:
        for hook in hooks:
            hook.remove()
    assert len(calls) == 9  # 3 on next_obs (the critic's target), 6 on obs: each actor before and after its step
