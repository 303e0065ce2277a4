"""Inference in three lines: `marl.load_policy(checkpoint, policy_id)` and `Algorithm.compute_single_action` /
`compute_actions` act as the module and connectors do by hand, on the same observations (recurrent state,
exploration, Box actions and a policy mapping included)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import marl
from marl.connectors.piece import RowContext
from marl.runners.module_inputs import ModuleInputs


def trained(config, tmp_path):
    algo = config.build()
    algo.train()
    algo.save(tmp_path / "ckpt")
    return algo, tmp_path / "ckpt"


def by_hand(path, policy_id, observations, explore=False, generator=None):
    """The module+connectors path a user could write: env->module pipeline, forward pass, distribution,
    module->env pipeline; one row per step of one agent, its recurrent state carried by hand."""
    module = marl.load_module(path, policy_id)
    connectors = marl.checkpoint.load_connectors(path, policy_id)
    inputs = ModuleInputs(module, connectors, policy_id)
    state = {k: v[None] for k, v in inputs.initial_state.items()}
    actions, logps = [], []
    for t, obs in enumerate(observations):
        ctx = RowContext([0], [0], [0], 1, 1, update_stats=False, returns=lambda: np.zeros(1))
        batch, _, _ = inputs([obs], ctx, [0], None, state if state else None, np.array([t == 0]))
        with torch.inference_mode():
            out = module.forward_exploration(batch) if explore else module.forward_inference(batch)
            dist = module.action_dist(out["action_dist_inputs"])
            action = dist.sample(generator) if explore else dist.deterministic_sample()
            logps.append(float(dist.logp(action)[0]))
        if state:
            state = {k: v.numpy() for k, v in out["state_out"].items()}
        actions.append(connectors.to_env(action.numpy(), ctx)[0])
    return actions, np.array(logps)


def cartpole(**env_runners):
    return (marl.PPOConfig().environment("CartPole-v1")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=64, observation_filter="mean_std", **env_runners)
            .training(train_batch_size=128, minibatch_size=64, num_epochs=1).debugging(seed=4))


def test_load_policy_acts_as_the_module_and_connectors_do(tmp_path):
    algo, path = trained(cartpole(), tmp_path)
    try:
        observations = [np.random.default_rng(i).normal(size=4).astype(np.float32) * 2 for i in range(12)]
        expected, _ = by_hand(path, "default_policy", observations)
        policy = marl.load_policy(path, "default_policy")
        got = [policy.compute_single_action(o) for o in observations]
        assert got == expected and isinstance(got[0], int) and len(set(got)) == 2  # both actions occur: not constant
        # the live algorithm, its current weights and filter statistics: the same actions
        assert [algo.compute_single_action(o) for o in observations] == expected
        # the filter matters: without its statistics the actions differ (so the comparison above can fail)
        raw = marl.inference.Policy(marl.load_module(path))
        assert [raw.compute_single_action(o) for o in observations] != expected
    finally:
        algo.stop()


def test_explore_samples_from_the_seeded_generator(tmp_path):
    algo, path = trained(cartpole(), tmp_path)
    algo.stop()
    observations = [np.random.default_rng(i).normal(size=4).astype(np.float32) for i in range(30)]
    expected, _ = by_hand(path, "default_policy", observations, explore=True, generator=torch.Generator().manual_seed(7))
    policy = marl.load_policy(path, seed=7)
    assert [policy.compute_single_action(o, explore=True) for o in observations] == expected
    greedy = [policy.compute_single_action(o) for o in observations]
    assert greedy != expected  # 30 draws all equal to the modes: the sample would not be a sample


def test_recurrent_state_is_carried_per_key_and_reset(tmp_path):
    config = (marl.PPOConfig().environment("StatelessCartPole-v1")
              .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32, observation_filter="mean_std")
              .training(train_batch_size=64, minibatch_size=64, num_epochs=1,
                        model={"hiddens": [16], "recurrent": "lstm", "cell_size": 16, "max_seq_len": 8})
              .debugging(seed=2))
    algo, path = trained(config, tmp_path)
    try:
        observations = [np.random.default_rng(i).normal(size=2).astype(np.float32) for i in range(10)]
        expected, expected_logp = by_hand(path, "default_policy", observations)
        policy = marl.load_policy(path)
        rows = [policy.act([o], ["a"], explore=False) for o in observations]
        assert [r.actions[0] for r in rows] == expected
        np.testing.assert_allclose([r.logp[0] for r in rows], expected_logp, rtol=1e-6)
        # without the carried state (every step an episode start) the log-probs differ: the state is used
        fresh = [policy.act([o], ["b"], explore=False) for o in observations if policy.reset(["b"]) is None]
        assert not np.allclose([r.logp[0] for r in fresh], expected_logp, rtol=1e-6)
        # two keys interleaved keep separate states; a reset starts the key's episode again
        policy.reset()
        both = [policy.compute_actions({"x": o, "y": o}) for o in observations]
        assert [b["x"] for b in both] == expected and [b["y"] for b in both] == expected
        again = [policy.compute_actions({"x": o}, new_episode=t == 0)["x"] for t, o in enumerate(observations)]
        assert again == expected
        live = [algo.compute_actions({"agent_0": o}, new_episode=t == 0)["agent_0"] for t, o in enumerate(observations)]
        assert live == expected
    finally:
        algo.stop()


def test_box_actions_go_through_the_module_to_env_connectors(tmp_path):
    config = (marl.PPOConfig().environment("Pendulum-v1")
              .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=64)
              .training(train_batch_size=64, minibatch_size=64, num_epochs=1).debugging(seed=1))
    algo, path = trained(config, tmp_path)
    algo.stop()
    observations = [np.random.default_rng(i).normal(size=3).astype(np.float32) * 5 for i in range(8)]
    expected, _ = by_hand(path, "default_policy", observations, explore=True, generator=torch.Generator().manual_seed(3))
    policy = marl.load_policy(path, seed=3)
    got = [policy.compute_single_action(o, explore=True) for o in observations]
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
        assert a.shape == (1,) and -2.0 <= a[0] <= 2.0  # clipped to Pendulum's bounds


def test_compute_actions_maps_agents_to_their_policies(tmp_path):
    config = (marl.PPOConfig().environment("mpe2.simple_tag_v3")
              .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=16)
              .multi_agent(policies=["predator", "prey"], policy_mapping_fn={"adversary_*": "predator", "*": "prey"})
              .training(train_batch_size=128, minibatch_size=64, num_epochs=1).debugging(seed=0))
    algo, path = trained(config, tmp_path)
    try:
        env = marl.make_env("mpe2.simple_tag_v3")
        obs, _ = env.reset(seed=0)
        env.close()
        actions = algo.compute_actions(obs)
        assert list(actions) == list(obs)
        for agent, ob in obs.items():
            pid = "predator" if agent.startswith("adversary_") else "prey"
            assert actions[agent] == marl.load_policy(path, pid).compute_single_action(ob, key=agent)
        with pytest.raises(KeyError, match="no policy 'nobody'"):
            algo.get_policy("nobody")
    finally:
        algo.stop()


def test_serve_clients_acting_locally_draw_what_the_server_would():
    """`PolicyClient(inference="local")` acts through `Policy.act` on flat observations; with the same generator it
    samples what the server's own pass (`marl.external.wire.act`) samples: the same actions, log-probs and values."""
    import gymnasium as gym

    from marl.connectors import build_policy_module
    from marl.external.wire import act
    from marl.inference import Policy
    from marl.policies import PolicySpec

    spec = PolicySpec(None, {}, gym.spaces.Box(-np.inf, np.inf, (18,), np.float32), gym.spaces.Discrete(5))
    module = build_policy_module(marl.PPOConfig().environment("mpe2.simple_spread_v3"), "default_policy", spec)
    obs = np.random.default_rng(0).normal(size=(3, 18)).astype(np.float32)
    server = act(module, obs, torch.Generator().manual_seed(5))
    policy = Policy(module, policy_id="shared", generator=torch.Generator().manual_seed(5))
    client = policy.act(list(obs), ["agent_0", "agent_1", "agent_2"], explore=True)
    np.testing.assert_array_equal(client.module_actions, server[0])
    np.testing.assert_array_equal(client.logp, server[1])
    np.testing.assert_array_equal(client.vf, server[2])
    assert client.actions == [int(a) for a in server[0]]
