"""The compiled rollout (`marl.runners.jax_rollout`, `env_runners.compiled_rollout`): a JaxMARL env's fragment
sampled by one jitted scan must give the step-by-step path's fragment on the same actions.

MPE simple_spread with max_steps 25 ends every episode at its 26th step (JaxMARL's `step >= max_steps`), so a
64-step fragment holds episode ends, truncation bootstraps and episodes carried across fragments.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.modules.popart import value_scales
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.runner_choice import runner_class
from tests.test_batched_envs import resumes_exactly

MPE = "jaxmarl.MPE_simple_spread_v3"
WORLDS, FRAGMENT = 4, 64


def config(compiled=True, env=MPE, env_config=None, algo=marl.PPOConfig, worlds=WORLDS, fragment=FRAGMENT, seed=0,
           mapping=None):
    env_config = {"max_steps": 25} if env_config is None else env_config
    cfg = (algo().environment(env, env_config=env_config)
           .env_runners(num_envs_per_env_runner=worlds, rollout_fragment_length=fragment, compiled_rollout=compiled)
           .training(train_batch_size=worlds * fragment * 3, minibatch_size=worlds * 16, num_epochs=1)
           .debugging(seed=seed))
    if mapping is not None:
        cfg.multi_agent(policies=sorted(set(mapping.values())), policy_mapping=mapping)
    cfg.validate()
    return cfg


def build(cfg):
    """The runner `cfg` samples with: the compiled rollout's (`CompiledRolloutRunner`) on a JaxMARL env."""
    return runner_class(cfg)(cfg, 0)


def fragments(runner, n: int) -> list[tuple]:
    """n samples, each with a copy of every policy's fragment tensors {pid: (actions, log-probs, values, obs)}."""
    out = []
    for _ in range(n):
        batch = runner.sample()
        out.append((batch, {pid: (p.fragment.actions.clone(), p.fragment.logp.clone(), p.fragment.vf.clone(),
                                  p.fragment.obs.clone()) for pid, p in runner.policies.items()}))
    return out


def replay(cfg, recorded: list[dict]) -> list:
    """The step-by-step path's samples on the same env seed, each policy acting its recorded actions ([T, W, A]
    per fragment) in turn."""
    runner = build(cfg)
    assert type(runner) is BatchedEnvRunner  # (compiled_rollout: false)
    for pid, policy in runner.policies.items():
        steps = iter([a for frag in recorded for a in frag[pid][0]])  # (a list: made now, for this pid)

        def recorded_act(inputs, rng, explore, want_logp, frozen=False, own=policy.act, steps=steps):
            _, logp, vf = own(inputs, rng, explore, want_logp, frozen)  # (its own log-probs, values: compared elsewhere)
            return next(steps).flatten(0, 1), logp, vf  # [W, A, ...] -> rows

        policy.act = recorded_act
    return [runner.sample() for _ in recorded]


def assert_same_fragments(got: list, expected: list, ends: bool = True) -> int:
    """Every policy's columns equal (bootstraps to 1e-5), the same episodes; the number of episodes that ended.
    `ends`: each fragment has truncations, their bootstrap values non-zero."""
    ended = 0
    for (batch, _), want in zip(got, expected):
        assert set(batch.batch.policy_batches) == set(want.batch.policy_batches)
        for pid, ref in want.batch.policy_batches.items():
            rows = batch.batch.policy_batches[pid]
            assert set(rows.keys()) == set(ref.keys())
            for key in ref.keys():
                assert rows[key].shape == ref[key].shape and rows[key].dtype == ref[key].dtype, key
                if key in (sb.ACTION_LOGP, sb.VF_PREDS):  # the two paths' own passes: compared against torch's
                    continue
                if key == sb.BOOTSTRAP_VALUE:
                    np.testing.assert_allclose(rows[key], ref[key], atol=1e-5, err_msg=key)
                else:
                    np.testing.assert_array_equal(rows[key], ref[key], err_msg=f"{pid} {key}")
            if ends:
                assert rows[sb.TRUNCATEDS].any() and (rows[sb.BOOTSTRAP_VALUE][rows[sb.TRUNCATEDS]] != 0).all()
        assert [(e["episode_id"], e["length"]) for e in batch.episodes] == [(e["episode_id"], e["length"]) for e in want.episodes]
        for e, f in zip(batch.episodes, want.episodes):
            assert e["return"] == pytest.approx(f["return"], rel=1e-9, abs=1e-9)
            assert e["agent_returns"] == pytest.approx(f["agent_returns"], rel=1e-9, abs=1e-9)
            assert e["policy_returns"] == pytest.approx(f["policy_returns"], rel=1e-9, abs=1e-9)
        ended += len(batch.episodes)
    return ended


def assert_torch_logp_and_values(runner, got: list) -> None:
    """The catch for a wrong JAX MLP or distribution: forward_exploration + action_dist.logp on the recorded rows."""
    for _, recorded in got:
        for pid, (actions, logp, vf, obs) in recorded.items():
            module = runner.module[pid]
            with torch.no_grad():
                out = module.forward_exploration({"obs": obs.reshape(-1, obs.shape[-1])})
                want = module.action_dist(out["action_dist_inputs"]).logp(actions.reshape(-1))
            np.testing.assert_allclose(logp.reshape(-1), want, atol=1e-5)
            np.testing.assert_allclose(vf.reshape(-1), out["vf_preds"], atol=1e-5)
            assert len(set(actions.reshape(-1).tolist())) == 5  # the draws explore every action


@pytest.fixture(scope="module")
def compiled_run():
    runner = build(config(True))
    assert runner.compiled is not None
    return runner, fragments(runner, 2)


def test_same_env_and_bookkeeping_as_the_step_by_step_path_on_the_same_actions(compiled_run):
    """Columns (keys, shapes, dtypes), observations, rewards, flags, episode ids and steps equal the step-by-step
    path's bitwise: the scan runs the adapter's own step body, and XLA computes the env's arithmetic the same way
    inside it here. Bootstrap values come from the JAX MLP against the NumPy actor's: float tolerance (1e-5);
    episode returns are a cumulative sum against a running one (float64): 1e-9."""
    _, got = compiled_run
    ended = assert_same_fragments(got, replay(config(False), [r for _, r in got]))
    assert ended == 2 * WORLDS * 2  # 128 steps of 26-step episodes: 4 ends per world, the first fragment's start


def test_recorded_logp_and_values_are_the_torch_modules(compiled_run):
    runner, got = compiled_run
    assert_torch_logp_and_values(runner, got)


def test_several_policies_each_act_for_their_agents():
    """agent_1 on its own policy, agents 0 and 2 on another (an index that is not a range): the same checks."""
    mapping = {"agent_0": "pair", "agent_1": "single", "agent_2": "pair"}
    runner = build(config(True, mapping=mapping, fragment=32))
    assert runner.compiled is not None and [p.index for p in runner.compiled.policies] == [(0, 2), (1,)]
    got = fragments(runner, 2)
    assert_same_fragments(got, replay(config(False, mapping=mapping, fragment=32), [r for _, r in got]))
    assert_torch_logp_and_values(runner, got)


@pytest.mark.parametrize("env, env_config", [
    ("jaxmarl.HeuristicEnemySMAX", {"scenario": "3m"}),  # a masked Categorical
    (MPE, {"max_steps": 25, "action_type": "Continuous"}),  # a Gaussian, its actions clipped to the Box
])
def test_masked_and_gaussian_heads_record_the_modules_logp(env, env_config):
    """The torch module's log-probs (masks applied; the Gaussian's summed over its dims), and the step-by-step path's
    fragment on the same actions (SMAX: terminations, masks; the Box: actions clipped before the env)."""
    cfg = lambda compiled: config(compiled, env, env_config, worlds=2, fragment=16)  # noqa: E731
    runner = build(cfg(True))
    assert runner.compiled is not None
    got = fragments(runner, 2)
    module = runner.module["default_policy"]
    for batch, _ in got:
        rows = batch.batch.policy_batches["default_policy"].to_numpy()
        inputs = {"obs": torch.from_numpy(rows[sb.OBS])}
        if sb.ACTION_MASK in rows:
            inputs["action_mask"] = torch.from_numpy(rows[sb.ACTION_MASK])
            assert (rows[sb.ACTION_MASK][np.arange(len(rows[sb.ACTIONS])), rows[sb.ACTIONS]] == 1).all()
            assert (rows[sb.ACTION_MASK] == 0).any()
        else:  # the Box is [0, 1]: unit-variance draws leave it, so the clipping is what the env sees
            assert (rows[sb.ACTIONS] < 0).any() and (rows[sb.ACTIONS] > 1).any()
        with torch.no_grad():
            out = module.forward_exploration(inputs)
            want = module.action_dist(out["action_dist_inputs"]).logp(torch.from_numpy(rows[sb.ACTIONS]))
        np.testing.assert_allclose(rows[sb.ACTION_LOGP], want, atol=1e-5)
        np.testing.assert_allclose(rows[sb.VF_PREDS], out["vf_preds"], atol=1e-5)
    assert_same_fragments(got, replay(cfg(False), [r for _, r in got]), ends=False)


def test_resumes_exactly_with_its_jax_key():
    cfg = config(True, fragment=16)
    state, first, expected = resumes_exactly(cfg)  # every column
    assert "rollout_key" in state
    other = build(cfg)  # without the key restored: other draws (the key is what resumes them)
    other.set_weights({"version": 1, "modules": first.module.get_state()})
    state.pop("rollout_key")
    other.set_state(state)
    assert not np.array_equal(other.sample().batch.policy_batches["default_policy"][sb.ACTIONS],
                              expected[0].batch.policy_batches["default_policy"][sb.ACTIONS])


def test_acts_with_the_weights_of_the_moment():
    """Weights changed in place (as a sync or an optimiser step does): the next fragment acts with them."""
    runner = build(config(True, fragment=16))
    batch = runner.sample()
    assert np.ptp(batch.batch.policy_batches["default_policy"][sb.ACTION_LOGP]) > 0.01
    head = [m for m in runner.module["default_policy"].pi if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
    logp = runner.sample().batch.policy_batches["default_policy"][sb.ACTION_LOGP]
    np.testing.assert_allclose(logp, -math.log(5), atol=1e-6)


def test_values_come_out_in_return_units_through_a_popart_scale():
    """A module with PopArt (`training.popart`): its ValueScale is one more linear layer to the compiled pass, so
    the recorded values are the torch module's, scale and shift applied (std 7, mean 50 here, not 1 and 0)."""
    cfg = config(True, fragment=16).training(popart=True)
    runner = build(cfg)
    assert runner.compiled is not None
    module = runner.module["default_policy"]
    runner.sample()  # (the compiled pass has read the weights once: the scale below is a change it must see)
    [(scale, _)] = value_scales(module)
    with torch.no_grad():  # (set directly: PopArt's own update would keep V where it is)
        scale.weight.fill_(7.0)
        scale.bias.fill_(50.0)
    rows = runner.sample().batch.policy_batches["default_policy"].to_numpy()
    with torch.no_grad():
        want = module.forward_exploration({"obs": torch.from_numpy(rows[sb.OBS])})["vf_preds"]
    assert abs(float(want.mean()) - 50.0) < 5.0
    np.testing.assert_allclose(rows[sb.VF_PREDS], want, rtol=1e-5, atol=1e-4)


def test_true_where_it_cannot_run_is_one_line_saying_why(caplog):
    with pytest.raises(ConfigError, match=r"compiled_rollout: true cannot run here: policy 'default_policy': module "
                                          r"CentralCriticMLP's acting pass reads more than its observations"):
        build(config(True, algo=marl.MAPPOConfig))
    cartpole = (marl.PPOConfig().environment("CartPole-v1")
                .env_runners(num_envs_per_env_runner=2, batched=True, compiled_rollout=True))
    with pytest.raises(ConfigError, match=r"'CartPole-v1' is not a JaxMARL env"):
        build(cartpole)
    with caplog.at_level(logging.INFO, logger="marl.runners.jax_rollout"):  # auto: one call per step, said once
        assert build(config("auto", algo=marl.MAPPOConfig)).compiled is None
    assert "the compiled rollout does not run here: policy 'default_policy': module CentralCriticMLP" in caplog.text
    with pytest.raises(ConfigError, match=r"compiled_rollout.*auto"):
        marl.PPOConfig().env_runners(compiled_rollout="sometimes")


@pytest.mark.slow
@pytest.mark.parametrize("lr", [2.5e-3])
def test_ppo_learns_simple_spread_through_the_compiled_rollout(lr):
    """PPO on JaxMARL's simple_spread, 16 worlds x 128 steps, 147k env steps through the compiled rollout (~35 s
    here): the return rises well above the first iterations' (a near-uniform policy's): -83.2 -> -60.9 (the last
    5 iterations' mean). With lr 0 (the mutant) it stays at -84.1 -> -85.7 and fails both margins."""
    cfg = (marl.PPOConfig().environment(MPE, env_config={})
           .env_runners(num_envs_per_env_runner=16, rollout_fragment_length=128, compiled_rollout=True)
           .training(train_batch_size=16 * 128 * 3, minibatch_size=16 * 128 * 3 // 4, num_epochs=4, lr=lr,
                     entropy_coeff=0.01, model={"hiddens": [64, 64], "activation": "tanh"})
           .debugging(seed=0))
    algo = cfg.build()
    try:
        assert algo.runners.local.compiled is not None
        returns = [algo.train()["episode_return_mean"] for _ in range(72)]
    finally:
        algo.stop()
    first, last = np.mean(returns[:3]), np.mean(returns[-5:])
    assert last > first + 15 and last > -72, (first, last)
