"""Runners acting through a module's NumPy copy of its acting pass (`marl.modules.numpy_acting`)."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import marl
from marl.data import sample_batch as sb
from marl.modules.activations import ACTIVATION_NAMES, mlp_description
from marl.modules.central_critic import CentralCriticMLP
from marl.modules.functional import TORCH_ACTIVATIONS
from marl.modules.numpy_acting import NUMPY_ACTIVATIONS
from marl.modules.jax_acting import jax_activation
from marl.modules.mlp import ActorCriticMLP
from marl.runners import EnvRunner

OBS = gym.spaces.Box(-1.0, 1.0, (18,))


def torch_pass(module, inputs: dict, explore: bool, generator: torch.Generator):
    """The runner's torch path: actions, log-probs and values (None without them) as NumPy."""
    tensors = {k: torch.from_numpy(v) for k, v in inputs.items()}
    with torch.inference_mode():
        out = module.forward_exploration(tensors) if explore else module.forward_inference(tensors)
        dist = module.action_dist(out["action_dist_inputs"])
        actions = (dist.sample(generator) if explore else dist.deterministic_sample()).numpy()
        values = out.get("vf_preds")
        return actions, dist.logp_numpy(actions), None if values is None else values.numpy()


def test_every_backend_runs_every_activation_of_the_module_description():
    """One description of a network (`mlp_description`: Linear layers and activations by name); torch, NumPy and the
    compiled JAX rollout each map every name to the same function."""
    x = np.linspace(-4.0, 4.0, 4097, dtype=np.float32).reshape(-1, 1)  # (past SMALL elements: torch's folded tanh too)
    has_jax = importlib.util.find_spec("jax") is not None  # (the jaxmarl extra)
    for kind, name in ACTIVATION_NAMES.items():
        want = kind()(torch.from_numpy(x.copy())).numpy()  # the module's own layer
        np.testing.assert_allclose(NUMPY_ACTIVATIONS[name](x.copy()), want, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(TORCH_ACTIVATIONS[name](torch.from_numpy(x.copy())).numpy(), want, atol=1e-6)
        if has_jax:
            np.testing.assert_allclose(np.asarray(jax_activation(name)(x)), want, atol=1e-6, err_msg=name)
    described = mlp_description(nn.Sequential(nn.Linear(3, 4), nn.SiLU(), nn.Linear(4, 1)))
    assert [(k, v if k == "activation" else type(v)) for k, v in described] == [
        ("linear", nn.Linear), ("activation", "silu"), ("linear", nn.Linear)]
    assert mlp_description(nn.Sequential(nn.Linear(3, 4), nn.GELU())) is None  # no backend but torch runs it


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "silu"])
@pytest.mark.parametrize("space", [gym.spaces.Discrete(5), gym.spaces.Box(-1.0, 1.0, (2,))], ids=["discrete", "box"])
@pytest.mark.parametrize("explore", [True, False])
@pytest.mark.parametrize("rows", [24, 2000])  # a dict runner's few rows (np.tanh) and a batched runner's (tanh folded)
def test_numpy_actor_gives_the_torch_pass_actions_log_probs_and_values(activation, space, explore, rows):
    torch.manual_seed(0)
    module = ActorCriticMLP(OBS, space, {"hiddens": [128, 128], "activation": activation, "initial_log_std": -0.5})
    actor = module.numpy_actor()
    assert actor is not None
    inputs = {"obs": np.random.default_rng(0).normal(size=(rows, 18)).astype(np.float32)}
    ours = actor.act(inputs, torch.Generator().manual_seed(3), explore)
    theirs = torch_pass(module, inputs, explore, torch.Generator().manual_seed(3))
    if isinstance(space, gym.spaces.Discrete):  # the same draws: the same actions (no tie flips)
        assert ours[0].dtype == theirs[0].dtype and (ours[0] == theirs[0]).all()
    else:
        np.testing.assert_allclose(ours[0], theirs[0], atol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], atol=2e-6)
    assert ours[1].dtype == np.float32
    if explore:
        np.testing.assert_allclose(ours[2], theirs[2], atol=2e-6)
    else:  # greedy acting is forward_inference's pass: no values
        assert ours[2] is None and theirs[2] is None


def test_numpy_actor_applies_the_action_mask():
    module = ActorCriticMLP(OBS, gym.spaces.Discrete(4), {"hiddens": [16]})
    mask = np.zeros((500, 4), np.float32)
    mask[:, 2] = 1.0
    mask[::2, 0] = 1.0
    inputs = {"obs": np.random.default_rng(1).normal(size=(500, 18)).astype(np.float32), "action_mask": mask}
    actions, logp, _ = module.numpy_actor().act(inputs, torch.Generator().manual_seed(0), True)
    assert mask[np.arange(500), actions].all()
    theirs = torch_pass(module, inputs, True, torch.Generator().manual_seed(0))
    assert (actions == theirs[0]).all()
    np.testing.assert_allclose(logp, theirs[1], atol=2e-6)


def test_numpy_actor_follows_every_weight_change():
    module = ActorCriticMLP(OBS, gym.spaces.Discrete(5), {"hiddens": [32, 32]})
    actor = module.numpy_actor()
    inputs = {"obs": np.random.default_rng(2).normal(size=(64, 18)).astype(np.float32)}
    actor.act(inputs, torch.Generator().manual_seed(0), True)
    other = ActorCriticMLP(OBS, gym.spaces.Discrete(5), {"hiddens": [32, 32]})
    with torch.no_grad():
        other.pi[-1].weight.mul_(300.0)  # far from near-uniform: stale weights would give other log-probs
    module.load_state_dict(other.state_dict())  # in place (version counters)
    np.testing.assert_allclose(actor.act(inputs, torch.Generator().manual_seed(0), True)[1],
                               torch_pass(module, inputs, True, torch.Generator().manual_seed(0))[1], atol=2e-5)
    module.vf[0].weight.data = torch.randn_like(module.vf[0].weight)  # new storage
    np.testing.assert_allclose(actor.act(inputs, torch.Generator().manual_seed(0), True)[2],
                               torch_pass(module, inputs, True, torch.Generator().manual_seed(0))[2], atol=2e-5)


@pytest.mark.parametrize("agent_id", [True, False])
@pytest.mark.parametrize("uint8_state", [True, False])
def test_central_critic_numpy_actor_joins_ids_and_scales_the_state(agent_id, uint8_state):
    torch.manual_seed(1)
    cfg = {"hiddens": [64, 64], "state_dim": 30, "num_agents": 3, "agent_id": agent_id}
    module = CentralCriticMLP(OBS, gym.spaces.Discrete(5), cfg)
    rng = np.random.default_rng(0)
    state = rng.integers(0, 256, (300, 30)).astype(np.uint8) if uint8_state else rng.normal(size=(300, 30)).astype(np.float32)
    inputs = {"obs": rng.normal(size=(300, 18)).astype(np.float32), "state": state,
              "agent_index": np.arange(300, dtype=np.int64) % 3}
    ours = module.numpy_actor().act(inputs, torch.Generator().manual_seed(5), True)
    theirs = torch_pass(module, inputs, True, torch.Generator().manual_seed(5))
    assert (ours[0] == theirs[0]).all()
    np.testing.assert_allclose(ours[1], theirs[1], atol=2e-6)
    np.testing.assert_allclose(ours[2], theirs[2], atol=2e-5)


class _PatchedPass(ActorCriticMLP):
    def forward_exploration(self, batch):
        return super().forward_exploration(batch)


def test_modules_that_cannot_be_mirrored_act_in_torch():
    assert _PatchedPass(OBS, gym.spaces.Discrete(3), {}).numpy_actor() is None  # a subclass may change the pass
    assert ActorCriticMLP(OBS, gym.spaces.MultiDiscrete([3, 2]), {}).numpy_actor() is None
    image = gym.spaces.Box(0, 255, (24, 24, 3), np.uint8)
    assert ActorCriticMLP(image, gym.spaces.Discrete(3), {}).numpy_actor() is None  # conv encoder
    module = ActorCriticMLP(OBS, gym.spaces.Discrete(3), {})
    module.pi[1] = nn.LeakyReLU()  # a layer with no NumPy twin
    assert module.numpy_actor() is None


def _spread_config(numpy_acting: bool):
    cfg = (marl.PPOConfig().environment("mpe2.simple_spread_v3", env_config={"N": 3, "max_cycles": 25})
           .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=60, numpy_acting=numpy_acting)
           .multi_agent(policies=["shared"], policy_mapping_fn=lambda agent, episode: "shared")
           .debugging(seed=11))
    cfg.validate()
    return cfg


def test_a_runner_records_the_same_rollout_acting_in_numpy_or_torch():
    """Same seed, either path: the same actions, rewards and episodes; log-probs and values to float rounding."""
    fast, slow = EnvRunner(_spread_config(True), 0), EnvRunner(_spread_config(False), 0)
    assert set(fast.numpy_actors) == {"shared"} and not slow.numpy_actors
    for _ in range(2):
        a, b = fast.sample()["shared"], slow.sample()["shared"]
        for column in (sb.ACTIONS, sb.REWARDS, sb.OBS, sb.TERMINATEDS, sb.TRUNCATEDS):
            np.testing.assert_array_equal(a[column], b[column])
        np.testing.assert_allclose(a[sb.ACTION_LOGP], b[sb.ACTION_LOGP], atol=2e-6)
        np.testing.assert_allclose(a[sb.VF_PREDS], b[sb.VF_PREDS], atol=2e-6)
    # A checkpoint taken on one path resumes on the other with the same draws (the generator is shared).
    state = fast.get_state()
    slow.set_state(state)
    fast.set_state(state)
    np.testing.assert_array_equal(fast.sample()["shared"][sb.ACTIONS], slow.sample()["shared"][sb.ACTIONS])
