"""Frozen population members on the runners (`set_frozen_policies`): a frozen DQN member acts greedily while the
learner explores; the set is runner state (checkpointed, given to a replacement); PSRO freezes its members."""

from __future__ import annotations

import numpy as np
import pytest
import ray.cloudpickle
import torch

from marl.algorithms.dqn import DQNConfig
from marl.data import sample_batch as sb
from marl.policies import MappingError
from marl.population.psro import PSRO
from marl.runners import EnvRunnerGroup
from marl.runners.env_runner import EnvRunner
from tests.actor_kill import kill_and_wait

ray.cloudpickle.register_pickle_by_value(__import__(__name__))  # runner actors cannot import this test module


def seat_main_first(agent_id, episode):
    return "main" if agent_id == "player_0" else "main@0"


def dqn_kuhn(epsilon=((0, 1.0), (1, 1.0)), **policies) -> DQNConfig:
    """DQN on kuhn_poker; by default `main` (player_0) against a copy `main@0` (player_1), both exploring with epsilon 1."""
    specs = policies or {"main": {"model": {"hiddens": [16]}}, "main@0": {"model": {"hiddens": [16]}, "spaces_from": "main"}}
    return (DQNConfig().environment("openspiel.kuhn_poker")
            .env_runners(num_envs_per_env_runner=8, rollout_fragment_length=32)
            .training(gamma=1.0, n_step=1, epsilon=[list(p) for p in epsilon])
            .multi_agent(policies=specs, policy_mapping=seat_main_first if len(specs) > 1 else None)
            .debugging(seed=0))


def greedy_share(runner: EnvRunner, batch, pid: str) -> tuple[float, int]:
    """The share of `pid`'s sampled actions that are the argmax of its Q-values over the legal ones, and how many."""
    rows = batch.batch.policy_batches[pid]
    obs = torch.as_tensor(rows[sb.OBS], dtype=torch.float32)
    q = runner.module[pid].q_values(obs).detach().numpy()
    q = np.where(rows[sb.ACTION_MASK] > 0.5, q, -np.inf)
    return float(np.mean(q.argmax(-1) == rows[sb.ACTIONS])), len(rows[sb.ACTIONS])


def test_a_frozen_dqn_member_acts_greedily_while_the_learner_explores_and_the_set_is_runner_state():
    runner = EnvRunner(dqn_kuhn())
    try:
        before = runner.sample()
        assert greedy_share(runner, before, "main@0")[0] < 0.8  # epsilon 1: both draw uniformly among 2 legal moves
        assert runner.set_frozen_policies(["main@0"]) == ["main@0"]
        after = runner.sample()
        share, rows = greedy_share(runner, after, "main@0")
        assert share == 1.0 and rows >= 100  # the frozen member: its argmax, every time
        assert greedy_share(runner, after, "main")[0] < 0.8  # the learner still explores
        # evaluation (explore=False) leaves a frozen DQN member greedy too
        assert runner.run_evaluation(20)["episodes"]
        # runner state: a runner restored from it acts as frozen members do
        restored = EnvRunner(dqn_kuhn())
        restored.set_state(runner.get_state())
        assert restored.frozen_policies == {"main@0"}
        restored.set_weights({"version": 1, "modules": runner.module.get_state()})
        assert greedy_share(restored, restored.sample(), "main@0")[0] == 1.0
        with pytest.raises(MappingError, match=r"unknown policies \['main@7'\]; this runner's are \['main', 'main@0'\]"):
            runner.set_frozen_policies(["main@7"])
    finally:
        runner.stop()


def test_a_replacement_runner_gets_the_frozen_policies(ray_session):
    """A killed runner's replacement acts as the one it replaces: the group resends the frozen set."""
    group = EnvRunnerGroup(dqn_kuhn().env_runners(num_env_runners=1))
    frozen = lambda runner: runner.frozen_policies  # noqa: E731
    try:
        group.set_frozen_policies(["main@0"])
        kill_and_wait(ray_session, group.remote[0])
        group.call_all("ping")  # finds the dead runner and replaces it
        assert group.restarts == 1
        assert ray_session.get(group.remote[0].__ray_call__.remote(frozen)) == {"main@0"}
    finally:
        group.stop()


def test_psro_with_dqn_best_responses_freezes_its_members_and_runs_an_epoch():
    config = (DQNConfig().environment("openspiel.kuhn_poker").env_runners(num_envs_per_env_runner=8, rollout_fragment_length=8)
              .training(gamma=1.0, n_step=1, epsilon=[[0, 1.0], [1000, 0.05]], min_env_steps_per_iteration=500,
                        training_intensity=4, num_steps_sampled_before_learning_starts=200)
              .multi_agent(policies={"main": {"model": {"hiddens": [32]}}}).debugging(seed=0))
    psro = PSRO(config, iterations_per_epoch=2, payoffs="exact", match_episodes=20)
    seen = []
    build = psro._build

    def spy(opponents, weights):
        algo = build(opponents, weights)
        original = algo.train

        def train():
            seen.append(sorted(algo.runners.local.frozen_policies))
            return original()

        algo.train = train
        return algo

    psro._build = spy
    for _ in range(2):
        result = psro.step()
    assert result["psro/population"] == 3 and 0.0 < result["psro/nash_conv"] < 2.0
    assert seen == [["main@0"]] * 2 + [["main@0", "main@1"]] * 2  # every best response trains against frozen members
