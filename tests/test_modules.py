"""Tests for marl.modules: the default actor-critic, distributions, module building and state."""

from __future__ import annotations

import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from marl.modules import (
    ActorCriticMLP,
    Categorical,
    DiagGaussian,
    MultiCategorical,
    MultiRLModule,
    RLModule,
    build_module,
    distribution_factory,
)
from marl.modules.spaces import action_input_dim, flat_obs_dim

B = 7


def _obs_batch(space: gym.Space, n: int = B) -> torch.Tensor:
    return torch.randn(n, flat_obs_dim(space))


# -- ActorCriticMLP shapes -----------------------------------------------------------

OBS_SPACES = {
    "box": gym.spaces.Box(-1, 1, (5,), np.float32),
    "box2d": gym.spaces.Box(-1, 1, (2, 3), np.float32),
    "discrete": gym.spaces.Discrete(4),
}
ACT_SPACES = {
    "discrete": (gym.spaces.Discrete(5), 5),
    "multidiscrete": (gym.spaces.MultiDiscrete([3, 2, 4]), 9),
    "box": (gym.spaces.Box(-2, 2, (3,), np.float32), 6),
}


@pytest.mark.parametrize("obs_name", sorted(OBS_SPACES))
@pytest.mark.parametrize("act_name", sorted(ACT_SPACES))
def test_actor_critic_output_shapes(obs_name, act_name):
    obs_space = OBS_SPACES[obs_name]
    act_space, width = ACT_SPACES[act_name]
    assert action_input_dim(act_space) == width
    module = ActorCriticMLP(obs_space, act_space, {"hiddens": [16]})
    out = module.forward_train({"obs": _obs_batch(obs_space)})
    assert out["action_dist_inputs"].shape == (B, width)
    assert out["vf_preds"].shape == (B,)
    assert out["action_dist_inputs"].requires_grad
    inf = module.forward_inference({"obs": _obs_batch(obs_space)})
    assert inf["action_dist_inputs"].shape == (B, width)
    assert not inf["action_dist_inputs"].requires_grad
    # the distribution built from the inputs accepts a sample of the right shape
    dist = module.action_dist(out["action_dist_inputs"])
    a = dist.sample()
    assert dist.logp(a).shape == (B,)
    assert dist.entropy().shape == (B,)


def test_flat_obs_dim_values():
    assert flat_obs_dim(OBS_SPACES["box2d"]) == 6
    assert flat_obs_dim(OBS_SPACES["discrete"]) == 4
    masked = gym.spaces.Dict(
        {"observation": gym.spaces.Box(0, 1, (9,), np.float32), "action_mask": gym.spaces.MultiBinary(3)}
    )
    assert flat_obs_dim(masked) == 9


def test_box_action_log_std_initialised_and_state_independent():
    module = ActorCriticMLP(OBS_SPACES["box"], ACT_SPACES["box"][0], {"initial_log_std": -0.5})
    out = module.forward_train({"obs": _obs_batch(OBS_SPACES["box"])})["action_dist_inputs"]
    torch.testing.assert_close(out[:, 3:], torch.full((B, 3), -0.5))


def test_hiddens_and_activation_used():
    module = ActorCriticMLP(OBS_SPACES["box"], ACT_SPACES["discrete"][0], {"hiddens": [8, 12], "activation": "relu"})
    linears = [m for m in module.pi if isinstance(m, nn.Linear)]
    assert [(lin.in_features, lin.out_features) for lin in linears] == [(5, 8), (8, 12), (12, 5)]
    assert any(isinstance(m, nn.ReLU) for m in module.pi)


def test_unknown_model_option_raises_naming_it():
    with pytest.raises(ValueError, match="hidens"):
        ActorCriticMLP(OBS_SPACES["box"], ACT_SPACES["discrete"][0], {"hidens": [8]})


def test_unknown_activation_raises():
    with pytest.raises(ValueError, match="sigmoidish"):
        ActorCriticMLP(OBS_SPACES["box"], ACT_SPACES["discrete"][0], {"activation": "sigmoidish"})


def test_unsupported_action_space_raises():
    with pytest.raises(TypeError, match="unsupported action space"):
        action_input_dim(gym.spaces.MultiBinary(3))
    with pytest.raises(TypeError):
        distribution_factory(gym.spaces.MultiBinary(3))


# -- distributions ------------------------------------------------------------------


def test_categorical_matches_torch():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(16, 6, generator=g) * 2
    logits2 = torch.randn(16, 6, generator=g)
    actions = torch.randint(0, 6, (16,), generator=g)
    ours, ref = Categorical(logits), torch.distributions.Categorical(logits=logits)
    other, ref_other = Categorical(logits2), torch.distributions.Categorical(logits=logits2)
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    torch.testing.assert_close(ours.kl(other), torch.distributions.kl_divergence(ref, ref_other))
    torch.testing.assert_close(ours.deterministic_sample(), logits.argmax(-1))
    assert (ours.kl(ours).abs() < 1e-6).all()


def test_categorical_gumbel_sampling_frequencies_match_softmax():
    torch.manual_seed(1234)
    n = 20000
    logits = torch.tensor([1.0, 0.0, -1.0, 2.0, 0.5])
    probs = torch.softmax(logits, -1).numpy()
    samples = Categorical(logits.expand(n, 5)).sample().numpy()
    counts = np.bincount(samples, minlength=5)
    expected = probs * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    # 4 degrees of freedom: P(chi2 > 25) ~ 5e-5.
    assert chi2 < 25.0, (counts, expected)
    np.testing.assert_allclose(counts / n, probs, atol=0.015)


def test_diag_gaussian_matches_torch_normal():
    g = torch.Generator().manual_seed(0)
    mean, log_std = torch.randn(10, 3, generator=g), torch.randn(10, 3, generator=g) * 0.5
    mean2, log_std2 = torch.randn(10, 3, generator=g), torch.randn(10, 3, generator=g) * 0.5
    actions = torch.randn(10, 3, generator=g)
    ours = DiagGaussian(torch.cat([mean, log_std], -1))
    other = DiagGaussian(torch.cat([mean2, log_std2], -1))
    ref = torch.distributions.Normal(mean, log_std.exp())
    ref_other = torch.distributions.Normal(mean2, log_std2.exp())
    torch.testing.assert_close(ours.logp(actions), ref.log_prob(actions).sum(-1))
    torch.testing.assert_close(ours.entropy(), ref.entropy().sum(-1))
    torch.testing.assert_close(ours.kl(other), torch.distributions.kl_divergence(ref, ref_other).sum(-1))
    torch.testing.assert_close(ours.deterministic_sample(), mean)


def test_diag_gaussian_sample_statistics():
    torch.manual_seed(0)
    inputs = torch.tensor([[1.0, -2.0, float(np.log(0.5)), float(np.log(2.0))]]).expand(20000, 4)
    s = DiagGaussian(inputs).sample()
    torch.testing.assert_close(s.mean(0), torch.tensor([1.0, -2.0]), atol=0.05, rtol=0)
    torch.testing.assert_close(s.std(0), torch.tensor([0.5, 2.0]), atol=0.05, rtol=0)


def test_multi_categorical_is_sum_of_parts():
    g = torch.Generator().manual_seed(0)
    nvec = [3, 2, 4]
    logits = torch.randn(8, 9, generator=g)
    logits2 = torch.randn(8, 9, generator=g)
    actions = torch.stack([torch.randint(0, n, (8,), generator=g) for n in nvec], -1)
    mc, mc2 = MultiCategorical(logits, nvec), MultiCategorical(logits2, nvec)
    chunks, chunks2 = torch.split(logits, nvec, -1), torch.split(logits2, nvec, -1)
    refs = [torch.distributions.Categorical(logits=c) for c in chunks]
    refs2 = [torch.distributions.Categorical(logits=c) for c in chunks2]
    torch.testing.assert_close(mc.logp(actions), sum(r.log_prob(actions[:, i]) for i, r in enumerate(refs)))
    torch.testing.assert_close(mc.entropy(), sum(r.entropy() for r in refs))
    torch.testing.assert_close(mc.kl(mc2), sum(torch.distributions.kl_divergence(a, b) for a, b in zip(refs, refs2)))
    s = mc.sample()
    assert s.shape == (8, 3)
    for i, n in enumerate(nvec):
        assert ((s[:, i] >= 0) & (s[:, i] < n)).all()


def test_distribution_factory_multidiscrete_uses_nvec():
    dist = distribution_factory(gym.spaces.MultiDiscrete([2, 3]))(torch.zeros(4, 5))
    assert isinstance(dist, MultiCategorical)
    torch.testing.assert_close(dist.logp(torch.zeros(4, 2, dtype=torch.long)), torch.full((4,), -np.log(6.0)))


def test_action_mask_never_samples_masked_actions():
    torch.manual_seed(0)
    space = gym.spaces.Discrete(5)
    module = ActorCriticMLP(gym.spaces.Box(-1, 1, (4,), np.float32), space, {"hiddens": [8]})
    n = 4000
    mask = torch.zeros(n, 5)
    mask[:, 1] = 1.0
    mask[: n // 2, 3] = 1.0  # first half: {1, 3} legal; second half only 1
    inputs = module.forward_exploration({"obs": torch.randn(n, 4), "action_mask": mask})["action_dist_inputs"]
    dist = module.action_dist(inputs)
    samples = dist.sample()
    assert bool(mask[torch.arange(n), samples].all())
    assert (samples[n // 2 :] == 1).all()
    assert set(samples[: n // 2].tolist()) == {1, 3}
    probs = dist.log_probs.exp()
    assert float(probs[mask < 0.5].max()) < 1e-12
    torch.testing.assert_close(probs.sum(-1), torch.ones(n))
    assert torch.isfinite(dist.entropy()).all()
    # deterministic action is legal too
    assert bool(mask[torch.arange(n), dist.deterministic_sample()].all())


def test_no_mask_leaves_logits_unchanged():
    logits = torch.randn(3, 4)
    assert RLModule.apply_action_mask(logits, {}) is logits


# -- build_module ---------------------------------------------------------------------


class TinyModule(RLModule):
    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        self.net = nn.Linear(self.obs_dim, self.action_dim + 1)

    def forward_train(self, batch):
        out = self.net(batch["obs"])
        return {"action_dist_inputs": out[:, :-1], "vf_preds": out[:, -1]}


SPACES = (gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2))


def test_build_module_default_is_actor_critic_mlp():
    m = build_module(None, *SPACES, {"hiddens": [4]})
    assert isinstance(m, ActorCriticMLP)


def test_build_module_by_class():
    m = build_module(TinyModule, *SPACES, {"x": 1})
    assert isinstance(m, TinyModule)
    assert m.model_config == {"x": 1}
    assert m.forward_train({"obs": torch.zeros(2, 3)})["action_dist_inputs"].shape == (2, 2)


@pytest.fixture
def importable_module(tmp_path, monkeypatch):
    src = textwrap.dedent(
        """
        from torch import nn
        from marl.modules import RLModule

        class PathModule(RLModule):
            def __init__(self, observation_space, action_space, model_config=None):
                super().__init__(observation_space, action_space, model_config)
                self.net = nn.Linear(self.obs_dim, self.action_dim)

            def forward_train(self, batch):
                return {"action_dist_inputs": self.net(batch["obs"]), "vf_preds": batch["obs"].sum(-1)}

        class NotAModule:
            pass
        """
    )
    (tmp_path / "marl_test_custom_mod.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "marl_test_custom_mod"


def test_build_module_by_import_path(importable_module):
    m = build_module(f"{importable_module}:PathModule", *SPACES, None)
    assert type(m).__name__ == "PathModule" and isinstance(m, RLModule)
    assert m.forward_train({"obs": torch.zeros(2, 3)})["action_dist_inputs"].shape == (2, 2)
    m2 = build_module(f"{importable_module}.PathModule", *SPACES, None)
    assert type(m2) is type(m)


def test_build_module_rejects_non_rlmodule(importable_module):
    with pytest.raises(ValueError, match="not a subclass"):
        build_module(f"{importable_module}:NotAModule", *SPACES, None)
    with pytest.raises(ValueError, match="not a subclass"):
        build_module(nn.Linear, *SPACES, None)


def test_build_module_bad_import_path():
    with pytest.raises(ValueError, match="cannot be imported"):
        build_module("no_such_pkg_xyz.mod:Cls", *SPACES, None)
    with pytest.raises(ValueError, match="cannot be imported"):
        build_module("marl.modules:NoSuchClass", *SPACES, None)


# -- MultiRLModule state -----------------------------------------------------------------


def _multi(seed: int) -> MultiRLModule:
    torch.manual_seed(seed)
    return MultiRLModule(
        {
            "predator": ActorCriticMLP(gym.spaces.Box(-1, 1, (16,), np.float32), gym.spaces.Discrete(5), {"hiddens": [8]}),
            "prey": ActorCriticMLP(gym.spaces.Box(-1, 1, (14,), np.float32), gym.spaces.Box(-1, 1, (2,)), {"hiddens": [8]}),
        }
    )


def test_multi_rl_module_state_round_trip():
    a, b = _multi(0), _multi(1)
    inputs = {"predator": {"obs": torch.randn(4, 16)}, "prey": {"obs": torch.randn(4, 14)}}
    before = {pid: b[pid].forward_train(x) for pid, x in inputs.items()}
    assert not torch.allclose(a["predator"].forward_train(inputs["predator"])["vf_preds"], before["predator"]["vf_preds"])
    state = a.get_state()
    assert set(state) == {"predator", "prey"}
    assert all(isinstance(v, np.ndarray) for s in state.values() for v in s.values())
    b.set_state(state)
    for pid, x in inputs.items():
        oa, ob = a[pid].forward_train(x), b[pid].forward_train(x)
        torch.testing.assert_close(oa["action_dist_inputs"], ob["action_dist_inputs"])
        torch.testing.assert_close(oa["vf_preds"], ob["vf_preds"])
    # state is a copy: changing a afterwards does not change b
    with torch.no_grad():
        for p in a.parameters():
            p.add_(1.0)
    assert not torch.allclose(
        a["prey"].forward_train(inputs["prey"])["vf_preds"], b["prey"].forward_train(inputs["prey"])["vf_preds"]
    )


def test_multi_rl_module_partial_state():
    a, b = _multi(0), _multi(1)
    b.set_state(a.get_state(["prey"]))
    x = {"obs": torch.randn(3, 14)}
    torch.testing.assert_close(a["prey"].forward_train(x)["vf_preds"], b["prey"].forward_train(x)["vf_preds"])
    y = {"obs": torch.randn(3, 16)}
    assert not torch.allclose(a["predator"].forward_train(y)["vf_preds"], b["predator"].forward_train(y)["vf_preds"])
    assert "prey" in a and "nobody" not in a
    assert sorted(a.keys()) == ["predator", "prey"]


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "silu"])
def test_fast_acting_path_matches_train_forward(activation):
    import gymnasium as gym

    from marl.modules import ActorCriticMLP

    torch.manual_seed(0)
    module = ActorCriticMLP(gym.spaces.Box(-1, 1, (5,)), gym.spaces.Discrete(4), {"hiddens": [16, 8], "activation": activation})
    obs = {"obs": torch.randn(7, 5)}
    train = module.forward_train(obs)
    explore = module.forward_exploration(obs)
    torch.testing.assert_close(explore["action_dist_inputs"], train["action_dist_inputs"])
    torch.testing.assert_close(explore["vf_preds"], train["vf_preds"])
    torch.testing.assert_close(module.forward_inference(obs)["action_dist_inputs"], train["action_dist_inputs"])


def test_a_policy_only_network_is_refused_by_an_algorithm_that_records_values():
    """model.value_function: false drops the value head; PPO, which records values, names the module."""
    import marl

    algo = marl.PPOConfig().environment("CartPole-v1").training(model={"value_function": False}).build()
    try:
        with pytest.raises(ValueError, match="records value predictions, but module ActorCriticMLP"):
            algo.train()
    finally:
        algo.stop()


@pytest.mark.parametrize("shape", [(7, 16), (512, 128)])  # below and above activations.SMALL
def test_tanh_activation_matches_torch_tanh_in_value_and_gradient(shape):
    """The default MLPs' tanh (2 sigmoid(2x) - 1 on large blocks, `marl.modules.activations`) is tanh: values and
    gradients within float32 rounding, the double-precision gradient checked numerically, and a
    module's state dict unchanged by it."""
    from marl.modules.activations import Tanh, tanh

    torch.manual_seed(0)
    x = (torch.randn(shape) * 4).requires_grad_()
    y = tanh(x)
    ref_x = x.detach().clone().requires_grad_()
    ref = torch.tanh(ref_x)
    torch.testing.assert_close(y, ref, atol=3e-7, rtol=0)
    grad = torch.randn(shape)
    y.backward(grad)
    ref.backward(grad)
    torch.testing.assert_close(x.grad, ref_x.grad, atol=2e-6, rtol=0)  # |grad| <= 4: 2 |y| dy |grad|
    with torch.inference_mode():
        torch.testing.assert_close(tanh(x.detach()), ref.detach(), atol=3e-7, rtol=0)
    x64 = torch.randn(shape, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(tanh, (x64,), fast_mode=True)
    module = ActorCriticMLP(OBS_SPACES["box"], ACT_SPACES["discrete"][0], {"hiddens": [8], "activation": "tanh"})
    assert any(isinstance(m, Tanh) for m in module.pi) and isinstance(Tanh(), nn.Tanh)
    assert list(module.state_dict()) == ["pi.0.weight", "pi.0.bias", "pi.2.weight", "pi.2.bias",
                                         "vf.0.weight", "vf.0.bias", "vf.2.weight", "vf.2.bias"]
