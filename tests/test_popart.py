"""PopArt value normalisation (`marl.modules.popart`): the statistics, the preserved outputs, the loss in
normalised units, and every path that reads V (NumPy acting, weights sync) seeing return units."""

from __future__ import annotations

import types

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.algorithms.impala.loss import value_fit
from marl.algorithms.ppo.loss import ppo_loss
from marl.data import sample_batch as sb
from marl.modules.central_critic import CentralCriticMLP
from marl.modules.mlp import ActorCriticMLP
from marl.modules.popart import BETA, ValueScale, normalise_value_targets, value_scales
from marl.modules.recurrent import RecurrentActorCritic
from marl.modules.rl_module import load_network_state, network_state

OBS = gym.spaces.Box(-1, 1, (6,), np.float32)


def _mlp(popart=True, seed=0):
    torch.manual_seed(seed)
    return ActorCriticMLP(OBS, gym.spaces.Discrete(3), {"popart": popart})


def _modules():
    torch.manual_seed(0)
    return {
        "mlp": (_mlp(), {"obs": torch.randn(64, 6)}),
        "recurrent": (RecurrentActorCritic(OBS, gym.spaces.Discrete(3), {"hiddens": [16], "recurrent": "gru",
                                                                         "cell_size": 8, "popart": True}),
                      {"obs": torch.randn(64, 6), "state_in": {"actor_h": torch.zeros(64, 8), "critic_h": torch.zeros(64, 8)}}),
        "central_critic": (CentralCriticMLP(OBS, gym.spaces.Discrete(3), {"state_dim": 10, "popart": True}),
                           {"obs": torch.randn(64, 6), "state": torch.randn(64, 10)}),
    }


@pytest.mark.parametrize("name", ["mlp", "recurrent", "central_critic"])
def test_updates_preserve_every_value_while_the_scale_follows_the_targets(name):
    module, batch = _modules()[name]
    assert len(value_scales(module)) == 1
    before = module.forward_train(batch)["vf_preds"].detach()
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        normalise_value_targets(module, 500.0 + 40.0 * torch.randn(128, generator=gen))
    after = module.forward_train(batch)["vf_preds"].detach()
    # "Preserving Outputs Precisely": the rescaled layer keeps V while mean and std moved by orders of magnitude
    torch.testing.assert_close(after, before, atol=1e-3 * 500, rtol=0)
    scale = value_scales(module)[0][0]
    assert float(scale.mean) == pytest.approx(500.0, rel=0.02)
    assert float(scale.std) == pytest.approx(40.0, rel=0.1)


def test_the_moments_are_debiased_exponential_averages():
    module = _mlp()
    normalise_value_targets(module, torch.tensor([10.0, 30.0]))
    scale = value_scales(module)[0][0]
    # one update: the debiased averages are the batch's own mean and std, not (1 - BETA) of them
    assert float(scale.mean) == pytest.approx(20.0) and float(scale.std) == pytest.approx(10.0)
    normalise_value_targets(module, torch.tensor([110.0, 130.0]))
    w = BETA / (BETA + 1.0)  # the old batch's weight after debiasing two updates: BETA (1 - BETA) / (1 - BETA^2)
    mean = w * 20.0 + (1 - w) * 120.0
    second = w * 500.0 + (1 - w) * (110.0**2 + 130.0**2) / 2
    assert float(scale.mean) == pytest.approx(mean, rel=1e-5)
    assert float(scale.std) == pytest.approx(np.sqrt(second - mean**2), rel=1e-5)


def test_the_scale_shrinks_large_targets_but_never_blows_small_or_constant_ones_up():
    """A solved task's targets are nearly one number, and 1 / std must not blow their tiny errors up: std stays at
    1 % of their size or more, and at 1 or more (targets already below unit scale are left at their scale)."""
    module = _mlp()
    for _ in range(2000):
        normalise_value_targets(module, 10_000.0 + 0.01 * torch.randn(64))
    assert float(value_scales(module)[0][0].std) == pytest.approx(100.0, rel=0.01)  # 1 % of 10,000, not ~0.01
    small = _mlp()
    for _ in range(200):
        normalise_value_targets(small, 0.3 + 0.4 * torch.randn(256))
    assert float(value_scales(small)[0][0].std) == 1.0  # not 0.4: the regression stays in return units
    assert float(value_scales(small)[0][0].mean) == pytest.approx(0.3, abs=0.02)


def test_without_popart_nothing_is_scaled():
    module = _mlp(popart=False)
    assert value_scales(module) == [] and normalise_value_targets(module, torch.randn(8)) is None


def test_a_bad_option_is_one_clear_line():
    with pytest.raises(ValueError, match="model.popart must be true or false, got 'yes'"):
        ActorCriticMLP(OBS, gym.spaces.Discrete(3), {"popart": "yes"})


def _ppo_batch(values: torch.Tensor, targets: torch.Tensor) -> dict:
    n = len(targets)
    return {sb.OBS: torch.randn(n, 6), sb.ACTIONS: torch.zeros(n, dtype=torch.long), sb.ACTION_LOGP: torch.zeros(n),
            sb.VF_PREDS: values, sb.ADVANTAGES: torch.zeros(n), sb.VALUE_TARGETS: targets}


def test_the_value_loss_is_in_units_of_the_targets_std():
    """The same network and batch: PopArt's loss is the raw squared error over std^2 (and reports std)."""
    cfg = types.SimpleNamespace(clip_param=0.2, vf_clip_param=1e9, vf_loss_coeff=1.0, entropy_coeff=0.0)
    targets = 1000.0 + 100.0 * torch.randn(256, generator=torch.Generator().manual_seed(1))
    plain, scaled = _mlp(popart=False), _mlp(popart=True)
    batch = _ppo_batch(torch.zeros(256), targets)
    _, raw = ppo_loss(plain, batch, cfg)
    _, normed = ppo_loss(scaled, batch, cfg)  # the update preserved V, so the raw errors are the plain net's
    std = float(normed["value_std"])
    assert std == pytest.approx(float(targets.std(unbiased=False)), rel=1e-4)
    assert float(normed["vf_loss"].detach()) == pytest.approx(float(raw["vf_loss"].detach()) / std**2, rel=1e-4)


def test_the_clip_of_the_value_change_is_in_units_of_std():
    """vf_clip_param 0.5 with std 100: a prediction may move 50 from the sampling-time value, not 0.5."""
    cfg = types.SimpleNamespace(clip_param=0.2, vf_clip_param=0.5, vf_loss_coeff=1.0, entropy_coeff=0.0)
    module = _mlp()
    targets = torch.tensor([-100.0, 100.0] * 64)
    batch = _ppo_batch(torch.zeros(128), targets)
    _, first = ppo_loss(module, batch, cfg)
    v = module.forward_train(batch)["vf_preds"].detach()
    # v moved from ~0 by far less than 50: the clip is not binding, so the loss is the unclipped normalised error
    expected = 0.5 * ((v - targets) ** 2).mean() / 100.0**2
    _, second = ppo_loss(module, batch, cfg)
    assert float(second["vf_loss"].detach()) == pytest.approx(float(expected), rel=1e-3)


def test_adam_fits_large_returns_only_with_popart():
    """The failure PopArt removes: Adam moves a weight by about lr per step, so a value head regressing on
    returns ~1,000 at lr 1e-3 is still far off after 300 steps (its variation across states unlearned); in normalised units it fits them."""
    gen = torch.Generator().manual_seed(0)
    obs = torch.randn(512, 6, generator=gen)
    targets = 1000.0 + 200.0 * obs[:, 0] + 100.0 * torch.tanh(obs[:, 1])
    explained = {}
    for popart in (False, True):
        module = _mlp(popart=popart)
        opt = torch.optim.Adam([p for p in module.parameters() if p.requires_grad], lr=1e-3)
        for step in range(300):
            rows = torch.randint(0, 512, (64,), generator=gen)
            std = normalise_value_targets(module, targets[rows])
            loss = value_fit(module.forward_train({"obs": obs[rows]})["vf_preds"], targets[rows], std)["vf_loss"]
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            explained[popart] = float(value_fit(module.forward_train({"obs": obs})["vf_preds"], targets)["vf_explained_var"])
    assert explained[True] > 0.8, explained
    assert explained[False] < 0.3, explained  # (measured: 0.0003 unscaled, 0.91 with PopArt)


def test_numpy_acting_and_synced_weights_read_the_scale():
    module = _mlp()
    for _ in range(20):
        normalise_value_targets(module, 50.0 + 5.0 * torch.randn(64))
    obs = torch.randn(32, 6)
    values = module.forward_train({"obs": obs})["vf_preds"].detach().numpy()
    actor = module.numpy_actor()
    assert actor is not None  # the ValueScale is a linear layer to the NumPy path: it stays mirrored
    actor.refresh()
    np.testing.assert_allclose(actor.vf(obs.numpy())[:, 0], values, rtol=1e-5, atol=1e-4)
    assert abs(values.mean()) < 100  # (the module has not learned; the scale is real: mean 50)
    copy = _mlp(seed=1)
    load_network_state(copy, network_state(module))  # what runners and checkpoints receive
    np.testing.assert_allclose(copy.forward_train({"obs": obs})["vf_preds"].detach().numpy(), values, rtol=1e-6)
    assert float(value_scales(copy)[0][0].moments[2]) > 0


def test_a_value_scale_must_follow_a_linear_layer():
    seq = torch.nn.Sequential(torch.nn.Linear(4, 1), torch.nn.Tanh(), ValueScale())
    with pytest.raises(TypeError, match="must follow a linear layer"):
        value_scales(seq)


@pytest.mark.parametrize("algo", ["PPO", "MAPPO", "APPO", "IMPALA", "A2C"])
def test_training_popart_reaches_the_default_modules_and_a_policy_may_say_otherwise(algo):
    env = "mpe2.simple_spread_v3" if algo == "MAPPO" else "CartPole-v1"
    cls = getattr(marl, f"{algo}Config")
    on = cls().environment(env).training(popart=True).resolved()
    pid = next(iter(on.policy_specs()))
    assert on.plan_for(pid).model["popart"] is True
    off = cls().environment(env).training(popart=True).multi_agent(
        policies={pid: {"model": {"popart": False}}}, policy_mapping=lambda agent, *a, **k: pid).resolved()
    assert off.plan_for(pid).model["popart"] is False


def test_a_users_module_gets_no_popart_option_it_did_not_declare():
    cfg = marl.PPOConfig().environment("CartPole-v1").training(popart=True).multi_agent(
        policies={"p": {"module_class": "tests.test_popart:_UsersModule"}}, policy_mapping=lambda *a, **k: "p").resolved()
    assert "popart" not in cfg.plan_for("p").model


class _UsersModule(ActorCriticMLP):
    pass


@pytest.mark.parametrize("kind", ["mlp", "recurrent"])
def test_weights_saved_without_the_scale_load_into_a_module_with_it_and_give_the_same_values(kind):
    """A checkpoint from before PopArt was on by default (APPO, IMPALA, PPO on Box actions): the scale starts as
    the identity and the layer before it keeps its weights (a recurrent head moves from head.* to head.0.*)."""
    def build(popart):
        torch.manual_seed(3)
        if kind == "mlp":
            return ActorCriticMLP(OBS, gym.spaces.Discrete(3), {"popart": popart})
        return RecurrentActorCritic(OBS, gym.spaces.Discrete(3), {"hiddens": [16], "recurrent": "gru", "cell_size": 8,
                                                                  "popart": popart})
    old, new = build(False), build(True)
    torch.manual_seed(4)
    for p in old.parameters():  # (weights unlike the new module's own init)
        p.data.normal_()
    batch = {"obs": torch.randn(16, 6)}
    if kind == "recurrent":
        batch["state_in"] = {"actor_h": torch.zeros(16, 8), "critic_h": torch.zeros(16, 8)}
    load_network_state(new, network_state(old))
    torch.testing.assert_close(new.forward_train(batch)["vf_preds"], old.forward_train(batch)["vf_preds"])
    with pytest.raises(RuntimeError):  # anything else that does not fit still fails
        load_network_state(new, {k: v for k, v in network_state(old).items() if "pi" not in k and "actor" not in k})


def test_the_frozen_scale_is_no_optimisers_parameter():
    algo = marl.APPOConfig().environment("CartPole-v1").build()
    try:
        learner = algo.learners.local
        [adam] = learner.optimizers["default_policy"].values()
        module = learner.module["default_policy"]
        assert len(adam.params) == sum(p.requires_grad for p in module.parameters()) == len(list(module.parameters())) - 2
    finally:
        algo.stop()
