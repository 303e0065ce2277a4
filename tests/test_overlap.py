"""Overlapped sampling: the next round is sampled on a runner actor while the learner trains on this one.

The graph's sample node runs mode=overlap (`env_runners.overlap`); the data lags the learner by one
update at most, which PPO/MAPPO take care of with the ratio to the behaviour policy's log-probs and
A2C/PG with the importance weight pi/mu (`behaviour_weighted_pg`).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import marl
from marl import A2CConfig, APPOConfig, DQNConfig, PGConfig, PPOConfig
from marl.algorithms.a2c.loss import behaviour_weighted_pg
from marl.runtime.algorithm import workflow_for
from marl.data import MultiAgentBatch, SampleBatch
from marl.data import sample_batch as sb
from marl.data.records import SampledBatch
from marl.errors import ConfigError
from marl.modules.distributions import Categorical


def overlapped(config, runners: int = 1):
    return config.environment("CartPole-v1").env_runners(num_env_runners=runners, overlap=True)


# -- no Ray needed -------------------------------------------------------------
@pytest.mark.parametrize("cls", [PPOConfig, A2CConfig, PGConfig, DQNConfig])
def test_the_graph_shows_the_overlap_mode(cls):
    assert workflow_for(cls().environment("CartPole-v1")).graph.nodes["sample"]["params"]["mode"] == "sync"
    graph = workflow_for(overlapped(cls())).graph
    assert graph.nodes["sample"]["params"]["mode"] == "overlap"


def test_overlap_needs_a_runner_actor_and_a_synchronous_graph():
    with pytest.raises(ConfigError, match="num_env_runners"):
        PPOConfig().environment("CartPole-v1").env_runners(overlap=True).validate()
    with pytest.raises(ConfigError, match="'env_runners.overlap' is not supported by APPO"):
        overlapped(APPOConfig()).validate()  # its record: it samples asynchronously already
    with pytest.raises(ConfigError, match="overlap"):
        marl.load_scenario("scenarios/cartpole_ppo.yaml", ["env_runners.overlap=2"])


def test_a2c_and_pg_record_behaviour_log_probs_only_when_overlapping():
    for cls in (A2CConfig, PGConfig):
        assert sb.ACTION_LOGP not in cls().columns_for("default_policy")
        assert sb.ACTION_LOGP in overlapped(cls()).columns_for("default_policy")


def test_behaviour_weighted_policy_gradient():
    torch.manual_seed(0)
    logits = torch.randn(6, 3, requires_grad=True)
    actions = torch.tensor([0, 1, 2, 0, 1, 2])
    adv = torch.randn(6)
    dist = Categorical(logits)
    logp = dist.logp(actions)

    def grad(loss):
        (g,) = torch.autograd.grad(loss, logits, retain_graph=True)
        return g

    plain, _ = behaviour_weighted_pg(dist, {sb.ACTIONS: actions, sb.ADVANTAGES: adv})
    on_policy, stats = behaviour_weighted_pg(dist, {sb.ACTIONS: actions, sb.ADVANTAGES: adv, sb.ACTION_LOGP: logp.detach()})
    torch.testing.assert_close(grad(on_policy), grad(plain))  # pi = mu: the plain policy gradient
    assert float(stats["behaviour_ratio_mean"]) == pytest.approx(1.0)
    mu = logp.detach() + torch.tensor([0.5, -0.5, 0.0, 0.2, -0.3, 0.1])  # rows sampled by another policy
    weighted, _ = behaviour_weighted_pg(dist, {sb.ACTIONS: actions, sb.ADVANTAGES: adv, sb.ACTION_LOGP: mu})
    ratio = (logp.detach() - mu).exp()
    by_hand = -(ratio * logp * adv).mean()  # the importance-sampled policy gradient
    torch.testing.assert_close(grad(weighted), grad(by_hand))
    assert not torch.allclose(grad(weighted), grad(plain))


def test_a_sampled_round_round_trips_through_a_state_tree(tmp_path):
    from marl.checkpoint.state_files import read_tree, write_tree

    cols = {sb.OBS: np.arange(12, dtype=np.float32).reshape(6, 2), sb.ACTIONS: np.arange(6)}
    record = SampledBatch(MultiAgentBatch({"p": SampleBatch(cols)}, 6), episodes=[{"episode_return": 3.5, "agent_returns": {"a": 1.0}}],
                          weights_versions=[4], runners=[1], connector_deltas=[{"p": {"count": 2.0, "mean": np.ones(2)}}])
    write_tree(record.to_state(), tmp_path, "s")
    back = SampledBatch.from_state(read_tree(tmp_path, "s"))
    assert back.env_steps == 6 and back.weights_versions == [4] and back.runners == [1]
    assert back.episodes == record.episodes
    np.testing.assert_array_equal(back["p"][sb.OBS], cols[sb.OBS])
    np.testing.assert_array_equal(back.connector_deltas[0]["p"]["mean"], np.ones(2))


# -- with a runner actor -------------------------------------------------------
def ppo_cartpole(overlap_round: str = "fragment"):
    """scenarios/cartpole_ppo.yaml's settings, one runner actor sampling beside the in-process learner
    (rounds of a whole train batch unless said otherwise: 8 envs x 256 steps)."""
    config = overlapped(marl.load_scenario("scenarios/cartpole_ppo.yaml")).debugging(seed=0)
    return config.env_runners(overlap_round=overlap_round)


def test_overlap_rounds_hold_half_a_train_batch_whatever_the_agent_count():
    """env_runners.overlap_round=half_batch (the default): one sample() brings at most half of a runner's share
    of the train batch in agent steps, so a multi-agent round is not a whole batch (or more) again."""
    from marl.runners import EnvRunner
    from marl.runners.fragments import fragment_length

    def spread(*overrides):
        return marl.load_scenario("scenarios/simple_spread_ppo.yaml", list(overrides))

    cartpole = overlapped(marl.load_scenario("scenarios/cartpole_ppo.yaml"))
    assert cartpole.env_runners_cfg.overlap_round == "half_batch"
    assert fragment_length(cartpole, 1) == 128  # 2048 agent steps / (2 x 8 envs)
    on = ["env_runners.num_env_runners=1", "env_runners.overlap=true"]
    assert fragment_length(spread(*on), 3) == 128  # 6144 agent steps / (2 x 8 envs x 3 agents)
    assert fragment_length(spread("env_runners.num_env_runners=2", "env_runners.overlap=true"), 3) == 64  # each runner's share
    assert fragment_length(spread(*on, "env_runners.rollout_fragment_length=32"), 3) == 32  # already short enough
    assert fragment_length(spread(*on, "env_runners.overlap_round=fragment"), 3) == 256  # a whole batch per round
    assert fragment_length(spread("env_runners.num_env_runners=1"), 3) == 256  # synchronous: as given
    assert fragment_length(overlapped(DQNConfig()).env_runners(rollout_fragment_length=64), 1) == 64  # not a batch unit
    runner = EnvRunner(cartpole.validate() or cartpole, 1)
    try:
        assert runner.sample().batch.agent_steps() == 1024  # two rounds make the 2048-step batch
    finally:
        runner.stop()
    with pytest.raises(ConfigError, match="overlap_round"):
        cartpole.env_runners(overlap_round="quarter").validate()


@pytest.mark.slow
def test_overlapped_ppo_lags_exactly_one_update_and_learns_cartpole(ray_session):
    """Whole-batch rounds lag one update, and PPO still learns from them: >= 80 and > 4x the first iteration's
    return after 7 iterations (14k env steps).

    Measured (2026-11-29, seeds 0-2): 128 / 113 / 133 after 7 iterations (first 21 / 20 / 21; 196 / 168 / 276
    after 10). Mutants: a PPO loss without its policy term stays at 21-25 (21.0 last); a runner group that never
    sends the actor new weights fails the lag check."""
    algo = ppo_cartpole().build()
    try:
        results = [algo.train() for _ in range(7)]
    finally:
        algo.stop()
    assert results[0]["perf/policy_lag_max"] == 0  # the first round was sampled before any update
    for r in results[1:]:  # every later round was sampled while the learner made the previous update
        assert r["perf/policy_lag_mean"] == 1 and r["perf/policy_lag_max"] == 1
    returns = [r["episode_return_mean"] for r in results]
    assert returns[-1] >= 80 and returns[-1] > 4 * returns[0], returns


@pytest.mark.slow
def test_overlapped_half_batch_run_resumes_exactly_and_dqn_overlaps_replay_learning(ray_session, tmp_path):
    """The default round (half a train batch): the first half of a batch was sampled during the previous update
    (lag 1), the second half with the weights that update produced (lag 0). Saved between iterations (the
    round in flight is waited for and kept), the run goes on bit-identically when restored."""
    config = ppo_cartpole("half_batch").env_runners(num_envs_per_env_runner=4, rollout_fragment_length=32).training(
        train_batch_size=128, minibatch_size=64, num_epochs=2)
    algo = config.build()
    try:
        first = algo.train()
        algo.save(tmp_path / "ck")  # waits for the round in flight and keeps it
        results = [algo.train() for _ in range(2)]
        weights = algo.get_weights()["modules"]
    finally:
        algo.stop()
    assert first["perf/policy_lag_max"] == 0 and first["env_steps_this_iter"] == 128
    for r in results:
        assert r["perf/policy_lag_mean"] == 0.5 and r["perf/policy_lag_max"] == 1
    restored = marl.Algorithm.from_checkpoint(tmp_path / "ck")
    try:
        assert restored.config.env_runners_cfg.overlap
        again = [restored.train() for _ in range(2)]
        weights_again = restored.get_weights()["modules"]
    finally:
        restored.stop()
    key = "losses/default_policy/total_loss"
    assert [r[key] for r in again] == [r[key] for r in results]
    assert [r["perf/policy_lag_mean"] for r in again] == [0.5, 0.5]
    for k in weights["default_policy"]:
        np.testing.assert_array_equal(weights["default_policy"][k], weights_again["default_policy"][k])

    dqn = overlapped(DQNConfig()).training(num_steps_sampled_before_learning_starts=64, min_env_steps_per_iteration=128,
                                           model={"hiddens": [32]}).debugging(seed=0).build()
    try:
        r = dqn.train()
        assert r["counters/learner_updates"] > 0 and r["env_steps_this_iter"] > 0
    finally:
        dqn.stop()


def test_a_runner_that_finishes_first_is_asked_for_its_next_round_at_once(ray_session):
    """GatherAhead: the fast runner's round k+1 is requested while the slow runner still samples round k; items
    stay whole rounds in runner order.

    Asserted by order, not by seconds: the slow runner's first round cannot end until the fast runner's second
    round has begun (it waits on a gate that only that round opens), so a GatherAhead that held the fast runner
    back until the whole round was in would leave the gate shut; the slow runner then gives up after
    `give_up_s` and reports it. The events are recorded on the driver, in the order GatherAhead made them.
    """
    import ray

    from marl.execution import GatherAhead, SharedMetrics

    give_up_s = 120.0  # only a broken GatherAhead waits this long; a loaded machine needs far less

    @ray.remote(num_cpus=0)
    class Gate:
        def __init__(self):
            self.opened = False

        def open(self):
            self.opened = True

        def is_open(self):
            return self.opened

    @ray.remote(num_cpus=0)
    class Runner:
        def __init__(self, gate, fast: bool):
            self.gate, self.fast, self.calls = gate, fast, 0

        def sample(self):
            import time

            self.calls += 1
            if self.fast and self.calls == 2:
                ray.get(self.gate.open.remote())  # round 2 of the fast runner has begun
            if not self.fast and self.calls == 1:  # the slow runner's round 1 lasts until then
                waited = 0.0
                while not ray.get(self.gate.is_open.remote()):
                    if waited >= give_up_s:
                        return (self.calls, "gave up waiting")
                    time.sleep(0.01)
                    waited += 0.01
            return (self.calls, "ok")

    events: list[tuple[str, int]] = []  # ("call" | "get", runner index), in the order GatherAhead made them

    class TwoActors:  # the part of EnvRunnerGroup that GatherAhead calls
        is_local, num_remote = False, 2

        def __init__(self):
            gate = Gate.remote()
            self.remote = [Runner.remote(gate, fast=True), Runner.remote(gate, fast=False)]

        def call_remote(self, i, method):
            events.append(("call", i))
            return getattr(self.remote[i], method).remote()

        def get_remote(self, i, ref, method):
            events.append(("get", i))
            return ray.get(ref)

    group = TwoActors()
    try:
        it = GatherAhead(group, SharedMetrics()).iterator
        first = next(it)
        second = next(it)
        assert first == [(1, "ok"), (1, "ok")] and second == [(2, "ok"), (2, "ok")]
        fast_round_2_called = [n for n, e in enumerate(events) if e == ("call", 0)][1]
        slow_round_1_collected = events.index(("get", 1))
        assert fast_round_2_called < slow_round_1_collected, events  # not held back until the slow runner was done
    finally:
        for actor in group.remote:
            ray.kill(actor)
