"""EnvRunner: per-policy batches, one forward pass per policy per step, episodes, bootstrapping."""

from __future__ import annotations

import numpy as np
import pytest

import marl
from marl.data import sample_batch as sb
from marl.runners import EnvRunner

TAG = {"num_good": 1, "num_adversaries": 3, "num_obstacles": 2, "max_cycles": 25, "continuous_actions": False}


def tag_config(**runner):
    cfg = (
        marl.PPOConfig()
        .environment("mpe2.simple_tag_v3", env_config=TAG)
        .env_runners(**({"num_envs_per_env_runner": 4, "rollout_fragment_length": 40} | runner))
        .multi_agent(policies={"predator": {}, "prey": {}}, policy_mapping_fn={"adversary_*": "predator", "*": "prey"})
        .debugging(seed=1)
    )
    cfg.validate()
    return cfg


def test_each_policy_batch_holds_exactly_its_agents_steps():
    runner = EnvRunner(tag_config(), 0)
    batch = runner.sample()
    assert batch.env_steps == 4 * 40
    pred, prey = batch["predator"], batch["prey"]
    assert len(pred) == 3 * 160 and len(prey) == 160
    agents = runner.possible_agents
    assert {agents[i] for i in np.unique(pred[sb.AGENT_INDEX])} == {"adversary_0", "adversary_1", "adversary_2"}
    assert {agents[i] for i in np.unique(prey[sb.AGENT_INDEX])} == {"agent_0"}
    assert pred[sb.OBS].shape == (480, 16) and prey[sb.OBS].shape == (160, 14)
    assert batch.batch.agent_steps() == 640
    # every (env copy, agent, step) appears once: the rows are the agent steps, no more, no less
    keys = set(zip(pred[sb.EPS_ID], pred[sb.AGENT_INDEX], pred[sb.T]))
    assert len(keys) == len(pred)


@pytest.mark.parametrize("numpy_acting", [True, False])
def test_one_forward_pass_per_policy_per_step(numpy_acting):
    runner = EnvRunner(tag_config(), 0)
    assert set(runner.numpy_actors) == {"predator", "prey"}  # the default MLPs act in NumPy
    if not numpy_acting:
        runner.numpy_actors = {}
    sizes = {"predator": [], "prey": []}
    for pid in sizes:  # acting passes (the module's torch pass, or its NumPy copy) and bootstrap passes
        for owner, name in [(runner.module[pid], "forward_exploration")] + (
                [(runner.numpy_actors[pid], "act"), (runner.numpy_actors[pid], "values")] if numpy_acting else []):
            original = getattr(owner, name)

            def counting(inputs, *args, pid=pid, original=original):
                sizes[pid].append(len(inputs["obs"]))
                return original(inputs, *args)

            setattr(owner, name, counting)
    runner.sample()
    # 40 steps: one pass per policy per step over all 4 envs' agents, plus one bootstrap
    # pass when the episodes truncate (step 25) and one when the fragment is cut.
    assert sizes["predator"] == [12] * 42
    assert sizes["prey"] == [4] * 42


def test_episode_metrics_and_binding():
    runner = EnvRunner(tag_config(rollout_fragment_length=60), 0)
    batch = runner.sample()
    episodes = batch.episodes
    assert len(episodes) == 4 * 2  # 60 steps per env: two 25-step episodes finished in each of 4 envs
    for ep in episodes:
        assert ep["length"] == 25
        assert ep["policy_of"] == {"adversary_0": "predator", "adversary_1": "predator", "adversary_2": "predator", "agent_0": "prey"}
        assert ep["policy_returns"]["predator"] == pytest.approx(sum(ep["agent_returns"][f"adversary_{i}"] for i in range(3)))
        assert ep["return"] == pytest.approx(sum(ep["agent_returns"].values()))


def test_rewards_in_rows_sum_to_episode_returns():
    runner = EnvRunner(tag_config(rollout_fragment_length=50), 0)
    batch = runner.sample()  # exactly two full episodes per env
    finished = {e["episode_id"]: e for e in batch.episodes}
    for pid in ("predator", "prey"):
        b = batch[pid]
        for eps in np.unique(b[sb.EPS_ID]):
            rows = b[sb.EPS_ID] == eps
            expected = finished[eps]["policy_returns"][pid]
            assert b[sb.REWARDS][rows].sum() == pytest.approx(expected, rel=1e-4, abs=1e-4)


def test_truncation_bootstraps_with_value_of_final_obs():
    runner = EnvRunner(tag_config(rollout_fragment_length=30), 0)
    b = runner.sample()["predator"]
    last = b[sb.T] == 24
    assert b[sb.TRUNCATEDS][last].all() and b[sb.SEGMENT_END][last].all()
    assert not b[sb.TERMINATEDS].any()
    assert np.all(b[sb.BOOTSTRAP_VALUE][last] != 0.0)
    # rows cut by the fragment end (t=4 of the 2nd episode) also bootstrap; mid-piece rows do not
    mid = ~b[sb.SEGMENT_END]
    assert np.all(b[sb.BOOTSTRAP_VALUE][mid] == 0.0)
    cut = b[sb.SEGMENT_END] & ~b[sb.TRUNCATEDS]
    assert cut.sum() == 4 * 3 and np.all(b[sb.T][cut] == 4)


def test_rows_are_grouped_by_agent_and_ordered_by_step():
    runner = EnvRunner(tag_config(), 0)
    b = runner.sample()["predator"]
    seg = np.cumsum(np.r_[0, b[sb.SEGMENT_END][:-1]])
    for s in np.unique(seg):
        rows = seg == s
        assert len(np.unique(b[sb.EPS_ID][rows])) == 1 and len(np.unique(b[sb.AGENT_INDEX][rows])) == 1
        assert np.all(np.diff(b[sb.T][rows]) == 1)


def test_turn_based_env_with_action_masks():
    cfg = marl.PPOConfig().environment("pettingzoo.classic.connect_four_v3").env_runners(
        num_envs_per_env_runner=3, rollout_fragment_length=64
    )
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    batch = runner.sample()
    b = batch["default_policy"]
    assert len(b) == batch.env_steps  # one acting agent per env step
    masks = b[sb.ACTION_MASK]
    assert masks.shape == (len(b), 7)
    assert np.all(masks[np.arange(len(b)), b[sb.ACTIONS]] == 1.0)  # only legal moves are taken
    episodes = batch.episodes
    assert episodes, "random connect four games finish within 64 moves"
    for ep in episodes:
        assert sorted(ep["agent_returns"].values()) in ([-1.0, 1.0], [0.0, 0.0])
    # a winning move's row is terminated with reward +1
    assert np.any(b[sb.TERMINATEDS] & (b[sb.REWARDS] == 1.0))


def test_continuous_actions_are_clipped_for_the_env():
    cfg = marl.PPOConfig().environment("Pendulum-v1").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=20)
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    b = runner.sample()["default_policy"]
    assert b[sb.ACTIONS].shape == (40, 1) and b[sb.ACTIONS].dtype == np.float32


def test_weights_are_versioned_and_skipped_when_unchanged():
    cfg = tag_config()
    a, b = EnvRunner(cfg, 0), EnvRunner(cfg, 1)
    weights = {"version": 7, "modules": a.module.get_state(), "connectors": {}}
    assert b.set_weights(weights) == 7
    obs = np.zeros((1, 16), np.float32)
    import torch

    out_a = a.module["predator"].forward_inference({"obs": torch.from_numpy(obs)})["action_dist_inputs"]
    out_b = b.module["predator"].forward_inference({"obs": torch.from_numpy(obs)})["action_dist_inputs"]
    assert torch.equal(out_a, out_b)
    assert b.sample().weights_versions == [7]


def test_seeded_runners_are_reproducible():
    cfg = tag_config()
    x = EnvRunner(cfg, 0).sample()["prey"]
    y = EnvRunner(cfg, 0).sample()["prey"]
    np.testing.assert_array_equal(x[sb.OBS], y[sb.OBS])
    np.testing.assert_array_equal(x[sb.ACTIONS], y[sb.ACTIONS])


def test_env_exception_names_env_and_step():
    class Exploding(marl.MultiAgentEnv):
        possible_agents = ["a"]
        metadata = {"name": "exploding", "turn_based": False}

        def __init__(self):
            import gymnasium as gym

            self.space = gym.spaces.Box(-1, 1, (2,))
            self.act = gym.spaces.Discrete(2)
            self.t = 0

        def observation_space(self, agent):
            return self.space

        def action_space(self, agent):
            return self.act

        def reset(self, seed=None):
            self.t = 0
            return {"a": np.zeros(2, np.float32)}, {}

        def step(self, actions):
            self.t += 1
            if self.t == 3:
                raise RuntimeError("boom")
            return {"a": np.zeros(2, np.float32)}, {"a": 0.0}, {"__all__": False}, {"__all__": False}, {}

    marl.register_env("exploding_test_env", lambda cfg: Exploding())
    cfg = marl.PPOConfig().environment("exploding_test_env").env_runners(num_envs_per_env_runner=1)
    cfg.validate()
    runner = EnvRunner(cfg, 0)
    with pytest.raises(marl.envs.EnvError, match=r"exploding_test_env.*step 2.*RuntimeError: boom"):
        runner.sample()
