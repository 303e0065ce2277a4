"""SAC, TD3, MASAC, MADDPG: the squashed Gaussian, the loss terms checked by hand, modules, configs, graphs."""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.algorithms.sac import loss as sac
from marl.algorithms.sac.workflow import polyak_per_round
from marl.algorithms.td3 import loss as td3
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.modules.actor_q import ActorQModule
from marl.modules.squashed import NoisyDeterministic, SquashedGaussian
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS

OBS = gym.spaces.Box(-1, 1, (3,))
BOX = gym.spaces.Box(-2, 2, (2,))


def _batch(n=6, act_dim=2, discrete=False, group=None, seed=0):
    rng = np.random.default_rng(seed)
    lead = (n,) if group is None else (n, group)
    actions = rng.integers(0, 4, n) if discrete else rng.uniform(-1, 1, lead + (act_dim,))
    return {
        sb.OBS: torch.tensor(rng.normal(size=lead + (3,)), dtype=torch.float32),
        sb.NEXT_OBS: torch.tensor(rng.normal(size=lead + (3,)), dtype=torch.float32),
        sb.ACTIONS: torch.tensor(actions, dtype=torch.int64 if discrete else torch.float32),
        sb.REWARDS: torch.tensor(rng.normal(size=n), dtype=torch.float32),
        sb.TERMINATEDS: torch.tensor([False, True] * (n // 2)),
        DISCOUNTS: torch.full((n,), 0.9),
        REPLAY_WEIGHTS: torch.tensor(rng.random(n), dtype=torch.float32),
    }


def _module(action_space=BOX, seed=0, **model):
    torch.manual_seed(seed)
    module = ActorQModule(OBS, action_space, {"hiddens": [16], **model})
    with torch.no_grad():
        module.log_alpha.fill_(math.log(0.3)) if hasattr(module, "log_alpha") else None
    return module


def _target_critics(module, seed=7):
    target = copy.deepcopy(module.critics)
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in target.parameters():
            p.add_(0.1 * torch.randn_like(p))  # a target that differs from the online critics
    return target


# -- the squashed Gaussian ----------------------------------------------------------------------------
def test_squashed_gaussian_logp_has_the_tanh_correction():
    """Against torch.distributions' tanh-transformed Normal (change of variables done independently)."""
    torch.manual_seed(0)
    inputs = torch.cat([0.5 * torch.randn(64, 2), torch.full((64, 2), -1.0)], -1)  # away from float32's tanh saturation
    dist = SquashedGaussian(inputs)
    actions, logp = dist.rsample_with_logp()
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(dist.mean, dist.std), [torch.distributions.transforms.TanhTransform()]
    )
    np.testing.assert_allclose(logp.detach().numpy(), reference.log_prob(actions).sum(-1).detach().numpy(), rtol=1e-4, atol=1e-4)
    # the log-prob of a stored action inverts the squash; without the correction it would differ by sum log(1 - a^2)
    np.testing.assert_allclose(dist.logp(actions.detach()).detach().numpy(), logp.detach().numpy(), rtol=1e-3, atol=1e-3)
    assert torch.all(actions.abs() < 1) and torch.equal(dist.deterministic_sample(), torch.tanh(dist.mean))
    # stable far out: log(1 - tanh(u)^2) would be log(0) = -inf at u = 30
    far = SquashedGaussian(torch.tensor([[30.0, -20.0]]))
    assert torch.isfinite(far.rsample_with_logp()[1]).all()


def test_noisy_deterministic_clips_and_acts_greedily():
    inputs = torch.tensor([[0.9, -0.5, 0.5, 0.5]])  # actions [0.9, -0.5], sigma 0.5
    dist = NoisyDeterministic(inputs)
    draws = torch.stack([dist.sample() for _ in range(200)])
    assert draws.max() <= 1.0 and draws.min() >= -1.0 and draws.std() > 0.2
    assert torch.equal(dist.deterministic_sample(), torch.tensor([[0.9, -0.5]]))


# -- SAC's terms by hand ------------------------------------------------------------------------------
def _hand_policy_sample(module, obs, eps):
    """The squashed sample and its log-prob, written out (naive tanh correction): obs [B, 3], eps [B, d]."""
    mean, log_std = module.actors[0](obs).chunk(2, -1)
    log_std = log_std.clamp(-20, 2)
    u = mean + log_std.exp() * eps
    a = torch.tanh(u)
    gauss = torch.distributions.Normal(mean, log_std.exp()).log_prob(u)
    return a, (gauss - torch.log(1 - a.pow(2))).sum(-1)


def test_sac_critic_target_is_the_twin_min_minus_the_entropy_term():
    module, batch, cfg = _module(), _batch(), marl.SACConfig().training_cfg
    targets = {"critic": _target_critics(module)}
    torch.manual_seed(3)
    loss, stats = sac.critic_loss(module, batch, cfg, targets)
    with torch.no_grad():
        torch.manual_seed(3)
        eps = torch.randn(6, 1, 2)[:, 0]
        a2, logp2 = _hand_policy_sample(module, batch[sb.NEXT_OBS], eps)
        x2 = torch.cat([batch[sb.NEXT_OBS], a2], -1)
        q1t, q2t = (c(x2).squeeze(-1) for c in targets["critic"])
        assert not torch.allclose(q1t, q2t)
        y = batch[sb.REWARDS] + 0.9 * (1 - batch[sb.TERMINATEDS].float()) * (torch.minimum(q1t, q2t) - 0.3 * logp2)
        x = torch.cat([batch[sb.OBS], batch[sb.ACTIONS]], -1)
        q1, q2 = (c(x).squeeze(-1) for c in module.critics)
        w = batch[REPLAY_WEIGHTS]
        expected = (w * 0.5 * (q1 - y) ** 2).mean() + (w * 0.5 * (q2 - y) ** 2).mean()
    assert stats["target_mean"].item() == pytest.approx(y.mean().item(), rel=1e-4)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-4)
    np.testing.assert_allclose(stats["td_error"].numpy(), (((q1 - y).abs() + (q2 - y).abs()) / 2).numpy(), rtol=1e-4)
    # terminated rows bootstrap from nothing
    done = batch[sb.TERMINATEDS]
    np.testing.assert_allclose(y[done].numpy(), batch[sb.REWARDS][done].numpy(), rtol=1e-6)


def test_sac_actor_loss_is_alpha_logp_minus_min_q_and_leaves_the_critics_alone():
    module, batch, cfg = _module(), _batch(), marl.SACConfig().training_cfg
    torch.manual_seed(4)
    loss, _ = sac.actor_loss(module, batch, cfg, {})
    loss.backward()
    assert all(p.grad is None for p in module.critic_parameters())  # another group's weights
    assert all(p.grad is not None for p in module.actor_parameters())
    with torch.no_grad():
        torch.manual_seed(4)
        a, logp = _hand_policy_sample(module, batch[sb.OBS], torch.randn(6, 1, 2)[:, 0])
        x = torch.cat([batch[sb.OBS], a], -1)
        q = torch.minimum(*(c(x).squeeze(-1) for c in module.critics))
    assert loss.item() == pytest.approx((0.3 * logp - q).mean().item(), rel=1e-4)


def test_sac_alpha_moves_toward_the_target_entropy():
    module, batch = _module(), _batch()
    for target, direction in ((-50.0, -1), (50.0, 1)):  # entropy above the target: alpha falls; below: it rises
        cfg = marl.SACConfig().training(target_entropy=target).training_cfg
        module.log_alpha.grad = None
        loss, _ = sac.alpha_loss(module, batch, cfg, {})
        loss.backward()
        assert np.sign(-module.log_alpha.grad.item()) == direction
    assert sac.target_entropy(module, marl.SACConfig().training_cfg) == -2.0  # -action dims


def test_discrete_sac_targets_are_expectations_over_the_policy():
    space = gym.spaces.Discrete(4)
    module, batch = _module(space), _batch(discrete=True)
    cfg = marl.SACConfig().training_cfg
    targets = {"critic": _target_critics(module)}
    loss, stats = sac.critic_loss(module, batch, cfg, targets)
    with torch.no_grad():
        logp2 = torch.log_softmax(module.actors[0](batch[sb.NEXT_OBS]), -1)
        qt = torch.minimum(*(c(batch[sb.NEXT_OBS]) for c in targets["critic"]))
        v = (logp2.exp() * (qt - 0.3 * logp2)).sum(-1)
        y = batch[sb.REWARDS] + 0.9 * (1 - batch[sb.TERMINATEDS].float()) * v
    assert stats["target_mean"].item() == pytest.approx(y.mean().item(), rel=1e-5)
    actor, _ = sac.actor_loss(module, batch, cfg, {})
    with torch.no_grad():
        logp = torch.log_softmax(module.actors[0](batch[sb.OBS]), -1)
        q = torch.minimum(*(c(batch[sb.OBS]) for c in module.critics))
        expected = (logp.exp() * (0.3 * logp - q)).sum(-1).mean()
    assert actor.item() == pytest.approx(expected.item(), rel=1e-5)
    assert sac.target_entropy(module, cfg) == pytest.approx(0.1 * math.log(4))


def test_discrete_dueling_critics_are_value_plus_centred_advantages():
    module = _module(gym.spaces.Discrete(4), dueling=True)
    obs = torch.randn(5, 1, 3)
    out = module.critics[0](obs[:, 0])  # [V, A_1..A_4]
    assert out.shape == (5, 5)
    expected = out[:, :1] + out[:, 1:] - out[:, 1:].mean(-1, keepdim=True)
    torch.testing.assert_close(module.q_values(obs, None)[0], expected)
    assert marl.SACConfig().environment("CartPole-v1").plan_for("default_policy").model["dueling"] is True
    assert marl.SACConfig().environment("CartPole-v1").training(dueling=False).plan_for("default_policy").model["dueling"] is False
    assert marl.SACConfig().environment("CartPole-v1").plan_for("default_policy").model | {"dueling": False} == \
        marl.SACConfig().environment("CartPole-v1").training(dueling=False).plan_for("default_policy").model
    td3 = marl.TD3Config().environment("Pendulum-v1").plan_for("default_policy").model  # Box critics: no dueling key
    assert "dueling" not in td3 and td3["twin_q"] is True and td3["deterministic"] is True
    assert "dueling" not in marl.TD3Config().environment("Pendulum-v1").training(twin_q=False).plan_for("default_policy").model


def test_discrete_sac_masks_illegal_actions_in_the_actor_and_the_soft_value():
    """Masked logits: the soft value at s' and the actor's expectation at s range over the legal actions
    only (a softmax over them, by hand); an all-zero mask (a terminated row) keeps every action."""
    space = gym.spaces.Discrete(4)
    module, batch = _module(space), _batch(discrete=True)
    cfg = marl.SACConfig().training_cfg
    targets = {"critic": _target_critics(module)}
    mask, next_mask = torch.ones(6, 4), torch.ones(6, 4)
    mask[:, 1], next_mask[:, [0, 3]] = 0.0, 0.0
    next_mask[5] = 0.0
    batch[sb.ACTION_MASK], batch[sb.NEXT_ACTION_MASK] = mask, next_mask

    def legal_logp(logits, m):
        return torch.where(m > 0.5, logits, torch.full_like(logits, -torch.inf)).log_softmax(-1) if m.any() else logits.log_softmax(-1)

    with torch.no_grad():
        raw2 = module.actors[0](batch[sb.NEXT_OBS])
        logp2 = torch.stack([legal_logp(raw2[i], next_mask[i]) for i in range(6)])
        qt = torch.minimum(*(c(batch[sb.NEXT_OBS]) for c in targets["critic"]))
        p2 = logp2.exp()
        v = (p2 * (qt - 0.3 * torch.where(p2 > 0, logp2, torch.zeros_like(logp2)))).sum(-1)
        y = batch[sb.REWARDS] + 0.9 * (1 - batch[sb.TERMINATEDS].float()) * v
        raw = module.actors[0](batch[sb.OBS])
        logp = torch.stack([legal_logp(raw[i], mask[i]) for i in range(6)])
        p = logp.exp()
        q = torch.minimum(*(c(batch[sb.OBS]) for c in module.critics))
        expected_actor = (p * (0.3 * torch.where(p > 0, logp, torch.zeros_like(logp)) - q)).sum(-1).mean()
        expected_entropy = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1).mean()
    _, stats = sac.critic_loss(module, batch, cfg, targets)
    assert stats["target_mean"].item() == pytest.approx(y.mean().item(), rel=1e-5)
    unmasked = dict(batch)
    del unmasked[sb.NEXT_ACTION_MASK]
    assert sac.critic_loss(module, unmasked, cfg, targets)[1]["target_mean"].item() != pytest.approx(y.mean().item(), rel=1e-3)
    actor, actor_stats = sac.actor_loss(module, batch, cfg, {})
    assert actor.item() == pytest.approx(expected_actor.item(), rel=1e-5)
    assert actor_stats["entropy"].item() == pytest.approx(expected_entropy.item(), rel=1e-5)
    actor.backward()
    assert all(torch.isfinite(p.grad).all() for p in module.actor_parameters())
    _, alpha_stats = sac.alpha_loss(module, batch, cfg, {})
    assert alpha_stats["entropy"].item() == pytest.approx(expected_entropy.item(), rel=1e-5)


def test_discrete_sac_trains_on_a_masked_turn_based_env_with_the_masks_replayed():
    """Connect Four (masks, two players on one policy): replay carries each row's legal actions at obs and
    at next_obs, every stored action was legal, and the losses stay finite."""
    algo = (
        marl.SACConfig().environment("pettingzoo.classic.connect_four_v3")
        .training(num_steps_sampled_before_learning_starts=64, min_env_steps_per_iteration=64, train_batch_size=32,
                  training_intensity=8, model={"hiddens": [32]})
        .debugging(seed=0).build()
    )
    try:
        result = algo.train()
        result = algo.train()
        rows, _ = algo.replay_buffers["default_policy"].sample(256)
        mask, actions = np.asarray(rows[sb.ACTION_MASK]), np.asarray(rows[sb.ACTIONS]).astype(int)
        assert mask.shape[1] == 7 and np.all(mask[np.arange(len(actions)), actions] > 0.5)
        assert sb.NEXT_ACTION_MASK in rows
        assert result["counters/learner_updates"] > 0
        assert all(math.isfinite(result[f"losses/default_policy/{g}/loss"]) for g in ("critic", "actor", "alpha"))
    finally:
        algo.stop()


# -- TD3 -------------------------------------------------------------------------------------------------
def test_td3_target_smoothing_by_hand():
    module = _module(deterministic=True)
    batch = _batch()
    cfg = marl.TD3Config().training(target_noise=0.3, target_noise_clip=0.2).training_cfg
    targets = {"critic": _target_critics(module), "actor": copy.deepcopy(module.actors)}
    with torch.no_grad():
        for p in targets["actor"].parameters():
            p.mul_(50.0)  # saturate some target actions near +-1, so the clip to [-1, 1] matters
    torch.manual_seed(5)
    _, stats = td3.critic_loss(module, batch, cfg, targets)
    with torch.no_grad():
        torch.manual_seed(5)
        noise = (torch.randn(6, 1, 2)[:, 0] * 0.3).clamp(-0.2, 0.2)
        assert noise.abs().max() == pytest.approx(0.2)  # the noise clip binds for some rows
        a2 = (torch.tanh(targets["actor"][0](batch[sb.NEXT_OBS])) + noise).clamp(-1, 1)
        x2 = torch.cat([batch[sb.NEXT_OBS], a2], -1)
        q_next = torch.minimum(*(c(x2).squeeze(-1) for c in targets["critic"]))
        y = batch[sb.REWARDS] + 0.9 * (1 - batch[sb.TERMINATEDS].float()) * q_next
    assert stats["target_mean"].item() == pytest.approx(y.mean().item(), rel=1e-5)
    # without smoothing the target actions are the target actor's own
    cfg0 = marl.TD3Config().training(target_noise=0.0).training_cfg
    a_plain = td3.smoothed_target_actions(module, batch[sb.NEXT_OBS].unsqueeze(1), cfg0, targets["actor"])
    assert torch.equal(a_plain[:, 0], torch.tanh(targets["actor"][0](batch[sb.NEXT_OBS])))


def test_td3_actor_is_delayed_and_maximises_the_first_critic():
    cfg = marl.TD3Config().training(policy_delay=3).training_cfg
    critic, actor = marl.TD3Config().algorithm_parts().param_groups(cfg)
    assert (critic.name, critic.every, actor.name, actor.every) == ("critic", 1, "actor", 3)
    module, batch = _module(deterministic=True), _batch()
    loss, _ = td3.actor_loss(module, batch, cfg, {})
    with torch.no_grad():
        x = torch.cat([batch[sb.OBS], torch.tanh(module.actors[0](batch[sb.OBS]))], -1)
        assert loss.item() == pytest.approx(-module.critics[0](x).mean().item(), rel=1e-5)


def test_exploration_noise_follows_its_schedule():
    module = _module(deterministic=True, exploration_noise=[[0, 0.5], [100, 0.1]])
    obs = torch.randn(4, 3)
    assert module.forward_exploration({"obs": obs})["action_dist_inputs"][:, 2:].eq(0.5).all()
    module.set_exploration_step(50)
    assert module.forward_exploration({"obs": obs})["action_dist_inputs"][:, 2:].sub(0.3).abs().max() < 1e-6
    assert module.forward_inference({"obs": obs})["action_dist_inputs"][:, 2:].eq(0.0).all()


# -- centralised critics (MASAC, MADDPG) --------------------------------------------------------------------
def test_centralised_critic_reads_the_joint_observation_and_action():
    module = _module(agent_indices=[0, 2, 3], shared_actor=False)
    assert len(module.actors) == 3 and module.critics[0][0].in_features == 3 * (3 + 2)
    # acting rows go to their agent's own actor (env agent 3 sits at place 2)
    obs = torch.randn(2, 3)
    out = module.forward_inference({"obs": obs, "agent_index": torch.tensor([3, 0])})["action_dist_inputs"]
    assert torch.allclose(out[0], module.actors[2](obs[:1])[0]) and torch.allclose(out[1], module.actors[0](obs[1:])[0])
    # the joint loss: obs [B, 3, obs_dim], the target entropy scales with the group
    batch = _batch(group=3)
    cfg = marl.MASACConfig().training_cfg
    torch.manual_seed(0)
    loss, stats = sac.critic_loss(module, batch, cfg, {"critic": _target_critics(module)})
    assert torch.isfinite(loss) and stats["td_error"].shape == (6,)
    with torch.no_grad():
        x = torch.cat([batch[sb.OBS].reshape(6, -1), batch[sb.ACTIONS].reshape(6, -1)], -1)
        assert stats["q_mean"].item() == pytest.approx(module.critics[0](x).mean().item(), rel=1e-5)


def test_maddpg_defaults_are_one_critic_no_smoothing_every_step():
    cfg = marl.MADDPGConfig().training_cfg
    assert (cfg.twin_q, cfg.target_noise, cfg.policy_delay) == (False, 0.0, 1)
    module = _module(deterministic=True, twin_q=False, agent_indices=[0, 1], agent_id=True)
    assert len(module.critics) == 1 and "agent_index" in module.inputs
    batch = _batch(group=2)
    targets = {"critic": _target_critics(module), "actor": copy.deepcopy(module.actors)}
    _, stats = td3.critic_loss(module, batch, cfg, targets)
    with torch.no_grad():
        a2 = torch.tanh(module.group_actor(batch[sb.NEXT_OBS], targets["actor"]))
        x2 = torch.cat([batch[sb.NEXT_OBS].reshape(6, -1), a2.reshape(6, -1)], -1)
        y = batch[sb.REWARDS] + 0.9 * (1 - batch[sb.TERMINATEDS].float()) * targets["critic"][0](x2).squeeze(-1)
    assert stats["target_mean"].item() == pytest.approx(y.mean().item(), rel=1e-5)


# -- configs and graphs -----------------------------------------------------------------------------------
def test_sac_family_actions_are_unsquashed_whatever_the_env_flag_says():
    """SAC's actors act in [-1, 1]: their policies' Box actions are rescaled to the bounds even with
    `environment.unsquash_actions: false` (the flag only concerns other algorithms' modules)."""
    from marl.connectors.build import module_to_env_pipeline

    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    for cls in (marl.SACConfig, marl.TD3Config):
        for flag in (False, True):
            config = cls().environment("Pendulum-v1", unsquash_actions=flag)
            config.validate()
            assert config.plan_for("default_policy").unsquash_actions is True
            pipeline = module_to_env_pipeline(config, "default_policy", space)
            np.testing.assert_allclose(pipeline(np.array([[1.0], [-0.5]], np.float32), None), [[2.0], [-1.0]])
    ppo = marl.PPOConfig().environment("Pendulum-v1")
    assert ppo.plan_for("default_policy").unsquash_actions is False
    assert ppo.environment(unsquash_actions=True).plan_for("default_policy").unsquash_actions is True


def test_configs_are_exported_and_name_bad_values():
    for name in ("SACConfig", "TD3Config", "MASACConfig", "MADDPGConfig"):
        assert getattr(marl, name).algo_name == name[: -len("Config")]
    with pytest.raises(ConfigError, match="exploration_noise"):
        marl.TD3Config().environment("Pendulum-v1").training(exploration_noise=[[0, -1.0]]).validate()
    with pytest.raises(ConfigError, match="tau"):
        marl.SACConfig().training(tau=2.0)


def test_the_graph_is_dqns_with_polyak_per_round():
    config = marl.SACConfig().environment("Pendulum-v1")
    graph = config.default_workflow().graph
    ops = [graph.nodes[n]["op"] for n in ("sample", "store", "replay", "learn", "update_priorities", "update_target", "sync_weights", "join", "report")]
    assert ops == ["sample", "store_to_replay", "replay", "learn", "update_priorities", "update_target", "sync_weights", "concurrently", "report"]
    # 1 env x 8 steps per round, 256 replayed transitions per env step, 256 per update: 8 updates per round
    assert graph.nodes["join"]["params"]["weights"] == [1, 8]
    assert graph.nodes["update_target"]["params"]["tau"] == pytest.approx(polyak_per_round(0.02, 8))
    assert polyak_per_round(0.005, 8) == pytest.approx(1 - 0.995**8)
    assert marl.MASACConfig().environment("mpe2.simple_spread_v3").default_workflow().graph.nodes["store"]["params"]["joint"] is True


# -- exact resume -----------------------------------------------------------------------------------------
def test_sac_with_prioritised_replay_resumes_bit_identically(tmp_path):
    """Replay contents and priorities, three optimisers, the target critics, the torch generator the policy
    samples its reparameterised actions from: all in the checkpoint."""
    def config():
        return (
            marl.SACConfig()
            .environment("Pendulum-v1")
            .env_runners(rollout_fragment_length=8)
            .training(train_batch_size=16, training_intensity=8, num_steps_sampled_before_learning_starts=32,
                      min_env_steps_per_iteration=48, prioritized_replay=True, replay_capacity=500,
                      model={"hiddens": [16, 16], "activation": "relu"})
            .debugging(seed=3)
        )

    def weights(algo):
        return algo.get_weights()["modules"]

    algo = config().build()
    try:
        for _ in range(3):
            algo.train()
        algo.save(tmp_path / "ckpt")
        straight = [algo.train() for _ in range(3)]
        expected = weights(algo)
        buffer = algo.replay_buffers["default_policy"]
        # the critics' TD errors became priorities: no longer all equal to the initial max priority
        assert len(np.unique(buffer.sum_tree[np.arange(len(buffer))])) > 1
        priorities = buffer.get_state()
    finally:
        algo.stop()
    algo = marl.Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        resumed = [algo.train() for _ in range(3)]
        got = weights(algo)
        resumed_priorities = algo.replay_buffers["default_policy"].get_state()
    finally:
        algo.stop()
    for key in expected["default_policy"]:
        np.testing.assert_array_equal(expected["default_policy"][key], got["default_policy"][key], err_msg=key)
    assert "log_alpha" in expected["default_policy"]
    for a, b in zip(straight, resumed):
        for key in ("env_steps_total", "episode_return_mean", "losses/default_policy/critic/loss", "losses/default_policy/alpha/alpha"):
            np.testing.assert_equal(a.get(key), b.get(key), err_msg=key)
    _assert_same_tree(priorities, resumed_priorities)


def _assert_same_tree(a, b, where="buffer"):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_same_tree(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where


# -- the scenarios run ----------------------------------------------------------------------------------
SMALL = ["training.num_steps_sampled_before_learning_starts=50", "training.min_env_steps_per_iteration=100",
         "training.train_batch_size=16", "training.training_intensity=4", "env_runners.num_envs_per_env_runner=2"]


@pytest.mark.parametrize("scenario, extra", [
    ("simple_spread_continuous_masac.yaml", ["training.shared_actor=false"]),  # an actor per agent
    ("simple_spread_continuous_maddpg.yaml", []),
    ("multiwalker_masac.yaml", []),
])
def test_group_scenarios_train_with_joint_replay(scenario, extra):
    if scenario.startswith("multiwalker"):
        pytest.importorskip("Box2D", reason="multiwalker needs the sisl extra: pip install 'marl[sisl]'")
    algo = marl.load_scenario(f"scenarios/{scenario}", SMALL + extra).build()
    try:
        algo.train()
        result = algo.train()
        buffer = algo.replay_buffers["default_policy"]
        assert len(buffer) == result["env_steps_total"]  # one joint row per env step, not one per agent
        assert result["counters/learner_updates"] > 0 and math.isfinite(result["losses/default_policy/critic/loss"])
        if "training.shared_actor=false" in extra:
            assert len(algo.learners.local.module["default_policy"].actors) == 3
    finally:
        algo.stop()
