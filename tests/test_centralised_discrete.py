"""MASAC and MADDPG over Discrete actions: the critic reads every agent's one-hot action; MASAC trains each actor
by discrete SAC's expectation over its own actions, MADDPG through a straight-through Gumbel-softmax.
The losses are checked by hand here; learning on discrete simple_spread: tests/test_centralised_discrete_learning.py."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.algorithms.maddpg import loss as maddpg
from marl.algorithms.masac import loss as masac
from marl.config.capabilities import check_action_spaces
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.modules.actor_q import ActorQModule
from marl.modules.distributions import Categorical
from marl.policies import PolicySpec
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS

OBS = gym.spaces.Box(-1, 1, (3,))
ACTIONS = gym.spaces.Discrete(4)


def _module(group=(0, 1), seed=0, **model):
    torch.manual_seed(seed)
    module = ActorQModule(OBS, ACTIONS, {"hiddens": [16], "agent_indices": list(group), **model})
    if hasattr(module, "log_alpha"):
        with torch.no_grad():
            module.log_alpha.fill_(math.log(0.3))
    return module


def _joint_batch(b=6, n=2, seed=0):
    rng = np.random.default_rng(seed)
    return {
        sb.OBS: torch.tensor(rng.normal(size=(b, n, 3)), dtype=torch.float32),
        sb.NEXT_OBS: torch.tensor(rng.normal(size=(b, n, 3)), dtype=torch.float32),
        sb.ACTIONS: torch.tensor(rng.integers(0, 4, (b, n))),
        sb.REWARDS: torch.tensor(rng.normal(size=b), dtype=torch.float32),
        sb.TERMINATEDS: torch.tensor([False, True] * (b // 2)),
        DISCOUNTS: torch.full((b,), 0.9),
        REPLAY_WEIGHTS: torch.ones(b),
    }


def _critic_at(module, critics, obs, joint_one_hot):
    """min_j Q_j(s, a) of rows obs [B, n, 3], a [B, n, 4], straight from the critics' MLPs."""
    x = torch.cat([obs.reshape(len(obs), -1), joint_one_hot.reshape(len(obs), -1)], -1)
    return torch.min(torch.stack([c(x).squeeze(-1) for c in critics]), 0).values


# -- the module --------------------------------------------------------------------------------------
def test_centralised_critics_read_every_agents_one_hot_action():
    module = _module(group=(0, 2, 3))
    assert module.critics[0][0].in_features == 3 * (3 + 4) and module.critics[0][-1].out_features == 1
    batch = _joint_batch(n=3)
    one_hot = module.one_hot_actions(batch[sb.ACTIONS])
    assert one_hot.shape == (6, 3, 4) and torch.equal(one_hot.argmax(-1), batch[sb.ACTIONS])
    q = module.q_values(batch[sb.OBS], one_hot)[0]
    with torch.no_grad():
        assert torch.allclose(q, _critic_at(module, module.critics[:1], batch[sb.OBS], one_hot))


def test_maddpgs_discrete_actor_samples_its_softmax_and_acts_greedily_at_inference():
    module = _module(deterministic=True, twin_q=False)
    assert module.action_dist is Categorical
    obs = torch.randn(5, 3)
    explore = module.forward_exploration({"obs": obs})["action_dist_inputs"]
    assert torch.allclose(explore, module.actors[0](obs))  # logits: no tanh, no sigma column
    greedy = module.forward_inference({"obs": obs})["action_dist_inputs"]
    assert torch.equal(Categorical(greedy).deterministic_sample(), module.actors[0](obs).argmax(-1))


def test_what_neither_form_supports_is_refused_in_one_line():
    with pytest.raises(ValueError, match="needs centralised critics"):  # TD3 over Discrete: no critic for it
        ActorQModule(OBS, ACTIONS, {"deterministic": True})
    with pytest.raises(ValueError, match="model.dueling needs per-action critics"):
        _module(dueling=True)
    with pytest.raises(ValueError, match="need a Box or Discrete action space"):
        ActorQModule(OBS, gym.spaces.MultiDiscrete([2, 3]), {"agent_indices": [0, 1]})
    for cls in (marl.MASACConfig, marl.MADDPGConfig):
        config = cls().environment("mpe2.simple_spread_v3")
        specs = {"default_policy": PolicySpec(None, {}, OBS, gym.spaces.MultiDiscrete([2, 3]))}
        with pytest.raises(ConfigError) as err:
            check_action_spaces(config, specs)
        text = str(err.value)
        assert "\n" not in text and text.startswith(f"{cls.algo_name} acts in Discrete or Box action spaces; "
                                                    "policy 'default_policy' has MultiDiscrete([2 3])"), text
    with pytest.raises(ConfigError, match=r"^TD3 acts in Box action spaces"):  # still Box only
        check_action_spaces(marl.TD3Config().environment("CartPole-v1"),
                            {"default_policy": PolicySpec(None, {}, OBS, ACTIONS)})


# -- MASAC: discrete SAC's expectations over each agent's own action -------------------------------------
def test_own_action_values_replace_one_agents_action_at_a_time():
    module = _module(group=(0, 1, 2))
    batch = _joint_batch(n=3)
    joint = module.one_hot_actions(batch[sb.ACTIONS])
    got = masac.own_action_values(module, batch[sb.OBS], joint)
    assert got.shape == (6, 3, 4)
    with torch.no_grad():
        for i in range(3):
            for a in range(4):
                varied = joint.clone()
                varied[:, i] = torch.nn.functional.one_hot(torch.tensor(a), 4).float()
                assert torch.allclose(got[:, i, a], _critic_at(module, module.critics, batch[sb.OBS], varied), atol=1e-6)


def test_masac_discrete_target_is_the_soft_value_averaged_over_agents():
    module, batch = _module(), _joint_batch()
    target = copy.deepcopy(module.critics)
    with torch.no_grad():
        for p in target.parameters():
            p.add_(0.1 * torch.randn_like(p))
    cfg = marl.MASACConfig().training_cfg
    torch.manual_seed(5)
    loss, stats = masac.critic_loss(module, batch, cfg, {"critic": target})
    with torch.no_grad():
        probs, logp = masac.joint_policy(module, batch[sb.NEXT_OBS])
        torch.manual_seed(5)
        sampled = masac.sampled_one_hots(probs)
        q_own = masac.own_action_values(module, batch[sb.NEXT_OBS], sampled, target)
        v = (probs * q_own).sum(-1).mean(-1) - 0.3 * (probs * logp).sum((-1, -2))
        y = batch[sb.REWARDS] + 0.9 * (1 - batch[sb.TERMINATEDS].float()) * v
        q = module.q_values(batch[sb.OBS], module.one_hot_actions(batch[sb.ACTIONS]))
    assert stats["target_mean"].item() == pytest.approx(y.mean().item(), rel=1e-5)
    assert loss.item() == pytest.approx(sum(0.5 * (qj - y).pow(2).mean() for qj in q).item(), rel=1e-5)


def test_masac_discrete_actor_and_temperature_losses():
    module, batch = _module(), _joint_batch()
    cfg = marl.MASACConfig().training_cfg
    torch.manual_seed(3)
    loss, _ = masac.actor_loss(module, batch, cfg, {})
    loss.backward()
    assert all(p.grad is None for p in module.critic_parameters())  # the critic is only read
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.actor_parameters())
    with torch.no_grad():
        probs, logp = masac.joint_policy(module, batch[sb.OBS])
        torch.manual_seed(3)
        q_own = masac.own_action_values(module, batch[sb.OBS], masac.sampled_one_hots(probs))
        assert loss.item() == pytest.approx((probs * (0.3 * logp - q_own)).sum((-1, -2)).mean().item(), rel=1e-5)
    alpha_loss, stats = masac.alpha_loss(module, batch, cfg, {})
    entropy = -(probs * logp).sum((-1, -2))
    expected = math.log(0.3) * (entropy - 2 * cfg.discrete_target_entropy_scale * math.log(4)).mean()
    assert alpha_loss.item() == pytest.approx(expected.item(), rel=1e-5)


# -- MADDPG: the straight-through Gumbel-softmax --------------------------------------------------------
def test_maddpg_discrete_target_reads_one_hot_samples_of_the_target_actors():
    module, batch = _module(deterministic=True, twin_q=False), _joint_batch()
    target_actors = copy.deepcopy(module.actors)
    with torch.no_grad():
        for p in target_actors.parameters():
            p.mul_(50.0)  # near-greedy target policies: their samples are their argmax
    cfg = marl.MADDPGConfig().training_cfg
    _, stats = maddpg.critic_loss(module, batch, cfg, {"critic": module.critics, "actor": target_actors})
    with torch.no_grad():
        greedy = module.one_hot_actions(module.group_actor(batch[sb.NEXT_OBS], target_actors).argmax(-1))
        y = batch[sb.REWARDS] + 0.9 * (1 - batch[sb.TERMINATEDS].float()) * _critic_at(module, module.critics, batch[sb.NEXT_OBS], greedy)
    assert stats["target_mean"].item() == pytest.approx(y.mean().item(), rel=1e-5)
    one_hots = maddpg.gumbel_one_hots(torch.zeros(4000, 1, 4))
    assert torch.equal(one_hots.sum(-1), torch.ones(4000, 1))
    assert one_hots.mean((0, 1)).sub(0.25).abs().max() < 0.03  # uniform logits: each action a quarter of the time


def test_maddpg_discrete_actor_feeds_the_critic_one_hots_and_gets_its_softmax_gradient():
    module, batch = _module(deterministic=True, twin_q=False), _joint_batch()
    cfg = marl.MADDPGConfig().training(gumbel_temperature=0.5).training_cfg
    seen = []
    hook = module.critics[0].register_forward_hook(lambda _m, inputs, _o: seen.append(inputs[0].detach()))
    loss, stats = maddpg.actor_loss(module, batch, cfg, {})
    hook.remove()
    actions = seen[0][:, 2 * 3:].reshape(6, 2, 4)  # the joint one-hot the critic read, after the observations
    assert torch.equal(actions.sum(-1), torch.ones(6, 2)) and set(actions.unique().tolist()) == {0.0, 1.0}
    loss.backward()
    assert all(p.grad is None for p in module.critic_parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.actor_parameters())
    assert torch.isfinite(stats["entropy"])


# -- a run: mpe2's simple_spread with discrete actions (its default) -----------------------------------------
@pytest.mark.parametrize("algo", ["MASAC", "MADDPG"])
def test_discrete_simple_spread_trains_with_joint_replay(algo):
    config = (
        marl.algorithms.config_from_dict({"algo": algo, "environment": {"env": "mpe2.simple_spread_v3"}})
        .env_runners(num_envs_per_env_runner=2)
        .training(num_steps_sampled_before_learning_starts=50, min_env_steps_per_iteration=100, train_batch_size=16,
                  training_intensity=4)
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        algo.train()
        result = algo.train()
        assert len(algo.replay_buffers["default_policy"]) == result["env_steps_total"]
        assert result["counters/learner_updates"] > 0 and math.isfinite(result["losses/default_policy/critic/loss"])
        assert math.isfinite(result["losses/default_policy/actor/loss"])
    finally:
        algo.stop()


@pytest.mark.parametrize("continuous", [True, False])
def test_per_agent_actors_each_act_on_their_own_rows_only(continuous):
    """An actor per agent (HASAC, MADDPG/MASAC with shared_actor false): each actor runs on its agent's rows, equal
    to every actor on every row and each row picked from its agent's actor (which did n times the work)."""

    from marl.modules.actor_q import apply_net

    action_space = gym.spaces.Box(-1, 1, (2,)) if continuous else gym.spaces.Discrete(4)
    module = ActorQModule(gym.spaces.Box(-1, 1, (5,)), action_space, {"agent_indices": [0, 1, 2], "shared_actor": False})
    assert len(module.actors) == 3
    obs = torch.randn(7, 3, 5)
    places = torch.arange(3).repeat(7)
    every = torch.stack([apply_net(actor, obs.reshape(21, 5)) for actor in module.actors])  # [actors, rows, out]
    picked = every[places, torch.arange(21)]
    torch.testing.assert_close(module.group_actor(obs), picked.view(7, 3, -1), rtol=1e-5, atol=1e-6)
    shuffled = torch.randperm(21)  # rows of mixed agents in any order (a runner's batch)
    rows = module.actor_rows(obs.reshape(21, 5)[shuffled], places[shuffled])
    torch.testing.assert_close(rows, picked[shuffled], rtol=1e-5, atol=1e-6)
    rows.sum().backward()  # gradients reach every actor through the rows it produced
    assert all(p.grad is not None for actor in module.actors for p in actor.parameters())
    with pytest.raises(IndexError, match="beyond the module's 3 actors"):
        module.actor_rows(obs.reshape(21, 5), places + 1)
