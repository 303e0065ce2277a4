"""MASAC and MADDPG critics over the env's global state (`critic_state: global_state`): the runners'
`state` and `next_state` columns reach joint replay, and the critics read them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import marl
from marl.data import sample_batch as sb
from marl.errors import ConfigError

SMALL = ["training.num_steps_sampled_before_learning_starts=50", "training.min_env_steps_per_iteration=100",
         "training.train_batch_size=16", "training.training_intensity=4", "env_runners.num_envs_per_env_runner=2",
         "env_runners.rollout_fragment_length=7", "training.critic_state=global_state"]


@pytest.mark.parametrize("scenario", ["simple_spread_continuous_masac.yaml", "simple_spread_continuous_maddpg.yaml"])
def test_centralised_critics_read_the_env_state_and_the_state_reached(scenario):
    """simple_spread's state() is its agents' observations joined, so every replayed state and next state
    must equal the joined obs and next obs: this checks the states reached at truncations (episodes of 25
    steps) and at fragment cuts (every 7 steps), which the runner reads from the env."""
    algo = marl.load_scenario(f"scenarios/{scenario}", SMALL).build()
    try:
        algo.train()
        result = algo.train()
        buffer = algo.replay_buffers["default_policy"]
        rows, _ = buffer.sample(len(buffer))
        obs, next_obs = np.asarray(rows[sb.OBS]), np.asarray(rows[sb.NEXT_OBS])
        live = ~np.asarray(rows[sb.TERMINATEDS])
        np.testing.assert_allclose(rows[sb.STATE], obs.reshape(len(obs), -1), atol=1e-6)
        np.testing.assert_allclose(rows[sb.NEXT_STATE][live], next_obs[live].reshape(int(live.sum()), -1), atol=1e-6)
        module = algo.learners.local.module["default_policy"]
        spec = algo.config.global_state_spec()
        assert module.state_dim == spec["dim"] == 54
        assert module.critics[0][0].in_features == spec["dim"] + 3 * module.act_dim
        assert result["counters/learner_updates"] > 0 and math.isfinite(result["losses/default_policy/critic/loss"])
    finally:
        algo.stop()


def test_critics_read_the_state_not_the_observations():
    import gymnasium as gym
    import torch

    from marl.modules.actor_q import ActorQModule

    torch.manual_seed(0)
    module = ActorQModule(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)),
                          {"hiddens": [8], "agent_indices": [0, 1], "state_dim": 5})
    obs, actions, state = torch.randn(4, 2, 3), torch.rand(4, 2, 2), torch.randn(4, 5)
    q = module.q_values(obs, actions, state=state)[0]
    assert torch.equal(q, module.q_values(torch.randn(4, 2, 3), actions, state=state)[0])  # obs unused
    expected = module.critics[0](torch.cat([state, actions.reshape(4, -1)], -1)).squeeze(-1)
    torch.testing.assert_close(q, expected)
    with pytest.raises(ValueError, match="state columns"):
        module.q_values(obs, actions)


def test_critic_state_is_checked():
    with pytest.raises(ConfigError, match="critic_state"):
        marl.load_scenario("scenarios/simple_spread_continuous_masac.yaml", ["training.critic_state=env"])
