"""Learner parameter groups: separate optimisers and learning rates, a frozen group, schedules, target copies.

The test algorithm is an actor-critic on CartPole whose `ActorCriticMLP` is cut into three groups:
`critic` (the value network), `actor` (the policy's output layer) and `trunk` (the policy's hidden
layers, frozen); the critic has a target copy (a sub-network). It is an `AlgorithmConfig` subclass
defined here, not registered anywhere.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest
import torch

import marl
from marl.algorithms.ppo import PPOConfig
from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.config.sections import doc
from marl.connectors import compute_gae
from marl.data import sample_batch as sb
from marl.learners import Learner, LearnerGroup
from marl.learners import ParamGroup, TargetCopy
from marl.modules.functional import run_sequential
from marl.runners import EnvRunner


@dataclass
class TwoGroupTraining:
    actor_lr: float = doc("actor Adam learning rate", 1e-3, min=0)
    critic_lr: float = doc("critic Adam learning rate", 3e-2, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-8, min=0)
    grad_clip: float | None = doc("max gradient norm of each group", 1e6, min=0)
    actor_every: int = doc("minibatch steps between actor steps", 1, min=1)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    gae_lambda: float = doc("GAE lambda", 0.95, min=0, max=1)
    train_batch_size: int = doc("env steps per update", 64, min=1)
    minibatch_size: int | None = doc("rows per SGD step; null: the whole batch", None, min=1)
    num_epochs: int = doc("passes over each batch", 1, min=1)


def actor_loss(module, batch, cfg, targets):
    dist = module.action_dist(module.forward_train(batch)["action_dist_inputs"])
    policy_loss = -(batch[sb.ADVANTAGES] * dist.logp(batch[sb.ACTIONS])).mean()
    return policy_loss, {"policy_loss": policy_loss, "loss": policy_loss}


def critic_loss(module, batch, cfg, targets):
    v = run_sequential(module.vf, batch[sb.OBS]).squeeze(-1)
    vf_loss = 0.5 * (v - batch[sb.VALUE_TARGETS]).pow(2).mean()
    with torch.no_grad():
        target_v = run_sequential(targets["critic"], batch[sb.OBS]).squeeze(-1)
    return vf_loss, {"vf_loss": vf_loss, "loss": vf_loss, "target_v_mean": target_v.mean()}


class TwoGroupParts(AlgorithmParts):
    loss_columns = (sb.OBS, sb.ACTIONS, sb.ADVANTAGES, sb.VALUE_TARGETS, sb.ACTION_MASK)

    @staticmethod
    def learner_connectors(cfg):
        return [partial(compute_gae, gamma=cfg.gamma, lambda_=cfg.gae_lambda)]

    def param_groups(self, cfg):
        return [
            ParamGroup("critic", critic_loss, lr=cfg.critic_lr, eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                       params=lambda m: m.vf.parameters()),
            ParamGroup("actor", actor_loss, lr=cfg.actor_lr, eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                       params=lambda m: m.pi[-1].parameters(), every=cfg.actor_every),
            ParamGroup("trunk", actor_loss, lr=cfg.actor_lr, eps=cfg.adam_eps,
                       params=lambda m: m.pi[:-1].parameters(), trainable=False),
        ]

    def target_copies(self, cfg):
        return [TargetCopy("critic", of=lambda m: m.vf)]


class TwoGroupConfig(AlgorithmConfig):
    algo_name = "TWO_GROUPS"
    training_section_cls = TwoGroupTraining
    sample_columns = PPOConfig.sample_columns  # the PPO-style loss reads values and log-probs

    def algorithm_parts(self):
        return TwoGroupParts()

    def default_workflow(self):
        from marl.algorithms.ppo.workflow import ppo_workflow

        return ppo_workflow(self)


def two_group_config(**training):
    return (
        TwoGroupConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
        .training(**training)
        .debugging(seed=7)
    )


def learner_and_batches(config, count: int):
    runner = EnvRunner(config, 0)
    batches = [runner.sample() for _ in range(count)]
    specs = runner.specs
    runner.stop()
    return Learner(config, specs), [getattr(b, "batch", b) for b in batches]  # a SampledBatch record holds one


def tensors(network: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in network.state_dict().items()}


def moved(before: dict, after: dict) -> np.ndarray:
    return np.concatenate([np.abs(after[k] - before[k]).ravel() for k in before])


# -- independent groups ------------------------------------------------------------------------
def test_groups_step_independently_with_their_own_learning_rates_and_the_frozen_one_stays():
    learner, (batch,) = learner_and_batches(two_group_config(actor_lr=1e-3, critic_lr=3e-2), 1)
    module = learner.module["default_policy"]
    assert list(learner.optimizers["default_policy"]) == ["critic", "actor"]  # the frozen trunk has no optimiser
    assert not any(p.requires_grad for p in module.pi[:-1].parameters())
    actor, critic, trunk = tensors(module.pi[-1]), tensors(module.vf), tensors(module.pi[:-1])

    stats = learner.update(batch)["default_policy"]

    assert all(np.array_equal(v, tensors(module.pi[:-1])[k]) for k, v in trunk.items()), "the frozen group moved"
    # Adam's first step moves each parameter by lr * g / (|g| + eps): its own group's lr, nothing else.
    for before, after, lr in ((actor, tensors(module.pi[-1]), 1e-3), (critic, tensors(module.vf), 3e-2)):
        delta = moved(before, after)
        assert delta.max() == pytest.approx(lr, rel=1e-3) and delta.max() <= lr * (1 + 1e-6)
    # Stats of several groups are namespaced by group; counts and per-row stats are the policy's.
    assert {"critic/vf_loss", "critic/loss", "critic/grad_norm", "critic/target_v_mean",
            "actor/policy_loss", "actor/loss", "actor/grad_norm"} <= set(stats)
    assert stats["num_sgd_steps"] == 1 and stats["agent_steps_trained"] == len(batch.policy_batches["default_policy"])
    for opt in learner.optimizers["default_policy"].values():
        assert all(float(s["step"]) == 1.0 for s in opt.state.values())


def test_a_group_declared_every_2_steps_half_as_often():
    learner, batches = learner_and_batches(two_group_config(actor_every=2, minibatch_size=32, num_epochs=2), 3)
    module = learner.module["default_policy"]
    actor_before = tensors(module.pi[-1])
    for batch in batches:  # 64 rows in minibatches of 32, 2 epochs: 4 steps per update, 12 in all
        stats = learner.update(batch)["default_policy"]
        assert stats["num_sgd_steps"] == 4
    optimizers = learner.optimizers["default_policy"]
    steps = {name: {float(s["step"]) for s in opt.state.values()} for name, opt in optimizers.items()}
    assert steps == {"critic": {12.0}, "actor": {6.0}}
    assert learner.sgd_steps["default_policy"] == 12
    assert moved(actor_before, tensors(module.pi[-1])).max() > 0

    # The schedule counts across updates: with one step per update, the actor steps on every other update.
    learner, batches = learner_and_batches(two_group_config(actor_every=2), 3)
    module = learner.module["default_policy"]
    seen = []
    for batch in batches:
        before = tensors(module.pi[-1])
        stats = learner.update(batch)["default_policy"]
        seen.append(("actor/policy_loss" in stats, bool(moved(before, tensors(module.pi[-1])).max() > 0)))
        assert "critic/vf_loss" in stats
    assert seen == [(True, True), (False, False), (True, True)]


def test_bad_declarations_are_named():
    class Overlapping(TwoGroupParts):
        def param_groups(self, cfg):
            groups = super().param_groups(cfg)
            return groups + [ParamGroup("all", actor_loss, lr=1e-3, eps=1e-8)]

    class BadSchedule(TwoGroupParts):
        def param_groups(self, cfg):
            return [ParamGroup("critic", critic_loss, lr=1e-3, eps=1e-8, every=0)]

    for parts, pattern in ((Overlapping, r"groups 'trunk' and 'all' both own parameter pi\.0\.weight"),
                           (BadSchedule, r"group 'critic' has every=0; it must be an int >= 1")):
        config = two_group_config()
        config.algorithm_parts = parts
        with pytest.raises(ValueError, match=pattern):
            learner_and_batches(config, 0)


# -- target copies -------------------------------------------------------------------------------
def test_polyak_and_copy_refresh_a_submodule_target():
    learner, _ = learner_and_batches(two_group_config(), 0)
    online, target = learner.module["default_policy"].vf, learner.targets["default_policy"]["critic"]
    assert set(target.state_dict()) == set(online.state_dict())  # a copy of the critic only
    assert not any(p.requires_grad for p in target.parameters())
    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    assert learner.update_target(tau=0.25) == ["default_policy"]
    for k, v in target.state_dict().items():
        torch.testing.assert_close(v, 0.75 * before[k] + 0.25 * online.state_dict()[k])
    learner.update_target(tau=1.0, policies=["default_policy"])
    for k, v in target.state_dict().items():
        assert torch.equal(v, online.state_dict()[k])
    assert learner.update_target(tau=1.0, policies=["someone_else"]) == []


# -- checkpoints ------------------------------------------------------------------------------
def flat(tree, prefix="") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def assert_same_tree(a: dict, b: dict) -> None:
    fa, fb = flat(a), flat(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        x, y = fa[key], fb[key]
        if torch.is_tensor(x) or isinstance(x, np.ndarray):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=key)
        else:
            assert x == y, key


def test_every_groups_optimiser_state_survives_save_and_restore_bit_identically(tmp_path):
    algo = two_group_config(actor_every=2, minibatch_size=32, num_epochs=1).build()
    try:
        for _ in range(3):
            algo.train()
        algo.save(tmp_path / "ckpt")
        learner = algo.learners.local
        saved = {"optimizers": copy.deepcopy(learner.get_optimizer_state()), "targets": learner.get_target_state(),
                 "sgd_steps": dict(learner.sgd_steps)}
        assert set(saved["optimizers"]["default_policy"]) == {"critic", "actor"}
        straight = [algo.train() for _ in range(2)]
        straight_weights = algo.get_weights()["modules"]
        algo.restore(tmp_path / "ckpt")
        restored = {"optimizers": learner.get_optimizer_state(), "targets": learner.get_target_state(),
                    "sgd_steps": dict(learner.sgd_steps)}
        assert_same_tree(saved, restored)
        resumed = [algo.train() for _ in range(2)]
        assert_same_tree(straight_weights, algo.get_weights()["modules"])
    finally:
        algo.stop()
    for a, b in zip(straight, resumed):
        for key in ("losses/default_policy/critic/vf_loss", "losses/default_policy/actor/policy_loss"):
            assert key in a and a[key] == b[key], key


def test_a_learner_state_written_before_groups_restores_into_the_default_group():
    """Before parameter groups a learner saved `optimizers: {pid: state_dict}` and `targets: {pid: module state}`."""
    config = (marl.DQNConfig().environment("CartPole-v1")
              .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32).debugging(seed=1))
    from marl.data import MultiAgentBatch
    from marl.replay import ReplayBuffer, nstep_transitions

    runner = EnvRunner(config, 0)
    sampled = runner.sample()
    specs = runner.specs
    runner.stop()
    buffer = ReplayBuffer(1000, seed=0)
    buffer.add(nstep_transitions(getattr(sampled, "batch", sampled).policy_batches["default_policy"], 1, 0.99))
    trained = Learner(config, specs)
    trained.update(MultiAgentBatch({"default_policy": buffer.sample(32)[0]}, 32))
    with torch.no_grad():
        for p in trained.module["default_policy"].parameters():
            p.add_(0.5)  # online and target differ
    state = trained.get_state()
    old = dict(state, optimizers={pid: g["default"] for pid, g in state["optimizers"].items()},
               targets={pid: c["target"] for pid, c in state["targets"].items()})
    del old["sgd_steps"]

    fresh = Learner(config, specs)
    fresh.set_state(old)
    assert_same_tree(fresh.get_optimizer_state(), trained.get_optimizer_state())
    assert_same_tree(fresh.get_target_state(), trained.get_target_state())
    assert fresh.sgd_steps == {"default_policy": 0}


# -- data-parallel learners ---------------------------------------------------------------------
def test_two_data_parallel_learners_update_several_groups_like_one(ray_session):
    # Ray's workers cannot import this test file: ship the test algorithm by value.
    ray_session.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    config = two_group_config(actor_every=2, minibatch_size=25, num_epochs=2)
    learner, batches = learner_and_batches(config, 2)
    specs = learner.specs
    single = LearnerGroup(config, specs)
    ddp = LearnerGroup(config.copy().learners(num_learners=2), specs)
    try:
        for batch in batches:
            s1 = single.update(batch)["default_policy"]
            s2 = ddp.update(batch)["default_policy"]
            rank0, rank1 = (w["modules"] for w in ray_session.get([a.get_weights.remote() for a in ddp.replicas]))
            assert_same_tree(rank0, rank1)
            ours = single.get_weights()["modules"]
            for key, value in flat(rank0).items():
                np.testing.assert_allclose(value, flat(ours)[key], rtol=1e-4, atol=1e-6, err_msg=key)
            assert s2["critic/vf_loss"] == pytest.approx(s1["critic/vf_loss"], rel=1e-3)
            assert s2["actor/policy_loss"] == pytest.approx(s1["actor/policy_loss"], rel=1e-3, abs=1e-6)
        steps = {name: {float(s["step"]) for s in opt["state"].values()}
                 for name, opt in ddp.get_optimizer_state()["default_policy"].items()}
        assert steps == {"critic": {12.0}, "actor": {6.0}}  # 64 rows / 25: 3 steps per epoch, 2 epochs, 2 updates
    finally:
        ddp.stop()
        ray_session.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
