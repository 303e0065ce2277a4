"""HAPPO and HATRPO: per-agent policies, the turn order, each turn's factor (the earlier agents' ratios on the same
env steps), the loss's refusal of a batch without one, HATRPO's KL-bounded step, one iteration end to end."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from marl import HAPPOConfig, HATRPOConfig
from marl.algorithms.happo.loss import FACTOR, NEW_LOGP, happo_loss
from marl.algorithms.happo.turns import AgentOrder, LearnInTurn, TurnsDone, env_steps_of
from marl.algorithms.hatrpo.loss import conjugate_gradient, trpo_step
from marl.data import MultiAgentBatch, SampleBatch
from marl.data import sample_batch as sb
from marl.data.records import SampledBatch
from marl.execution import LocalIterator, SharedMetrics
from marl.modules.central_critic import CentralCriticMLP
from marl.workflow import ExecutionContext
from small_teams import AGENTS



def _config(cls=HAPPOConfig, **kw):
    return (cls().environment("happo_pick").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=20)
            .training(train_batch_size=120, minibatch_size=60, model={"hiddens": [8]}, **kw).debugging(seed=0))


def test_each_agent_gets_its_own_policy_unless_policies_are_declared():
    assert list(_config().resolved().policy_specs()) == AGENTS
    declared = _config().multi_agent(policies=["shared"], policy_mapping_fn={"*": "shared"}).resolved()
    assert list(declared.policy_specs()) == ["shared"]


def test_the_graph_has_one_turn_per_trained_policy():
    wf = _config().default_workflow().validate()
    turns = [n for n, data in wf.graph.nodes(data=True) if data["op"] == "learn_in_turn"]
    assert turns == ["turn_0", "turn_1", "turn_2"]
    assert list(wf.graph.successors("turn_2")) == ["turns_done"]
    assert "agent_order --batch--> turn_0" in wf.describe()


def test_rows_of_one_env_step_share_one_factor_slot():
    a = SampleBatch({sb.EPS_ID: np.array([5, 5, 6]), sb.T: np.array([0, 1, 0])})
    b = SampleBatch({sb.EPS_ID: np.array([6, 5]), sb.T: np.array([0, 1])})
    step_of, steps = env_steps_of({"a": a, "b": b})
    assert steps == 3 and step_of["a"][2] == step_of["b"][0] and step_of["a"][1] == step_of["b"][1]
    assert len(set(step_of["a"].tolist())) == 3


class _Learners:
    """Stands in for the learner group: records each turn's batch; the policy's new log-probs are the old ones
    plus a shift per policy (so its ratio is exp(shift) on every row)."""

    SHIFT = {"p0": 0.5, "p1": -0.25, "p2": 0.1}

    def __init__(self):
        self.version, self.seen = 1, []

    def update(self, batch, deltas, env_steps):
        (pid, rows), = batch.policy_batches.items()
        self.seen.append((pid, rows[FACTOR].copy(), rows[sb.EPS_ID].copy(), rows[sb.T].copy(), list(deltas)))
        self.version += 1
        return {pid: {NEW_LOGP: rows[sb.ACTION_LOGP] + self.SHIFT[pid], "agent_steps_trained": len(rows)}}


def _rows(eps, t):
    n = len(eps)
    return SampleBatch({sb.EPS_ID: np.array(eps), sb.T: np.array(t), sb.ACTION_LOGP: np.full(n, -0.7, np.float32)})


def test_each_turn_weighs_its_rows_by_the_earlier_turns_ratios_at_the_same_env_steps():
    # p0 acts for two agents (a group: both its rows at a step multiply in); p1 and p2 for one each; p2 misses step (1, 1)
    batch = MultiAgentBatch({"p0": _rows([1, 1, 1, 1], [0, 0, 1, 1]), "p1": _rows([1, 1], [0, 1]), "p2": _rows([1], [0])}, 2)
    record = SampledBatch(batch, connector_deltas=[{"p0": "delta"}], weights_versions=[1])
    learners, metrics = _Learners(), SharedMetrics()
    config = _config().multi_agent(policies=["p0", "p1", "p2"], policy_mapping_fn={"*": "p0"})
    ctx = ExecutionContext(config, None, learners, metrics, policy_specs={p: None for p in ["p0", "p1", "p2"]})
    it = LocalIterator(lambda: iter([record]), metrics)
    it = AgentOrder(shuffle=False).build(ctx, [it])
    for turn in range(3):
        it = LearnInTurn(turn=turn).build(ctx, [it])
    results = next(TurnsDone().build(ctx, [it]))
    (p0, f0, *_, d0), (p1, f1, _, t1, d1), (p2, f2, *_, d2) = learners.seen
    assert (p0, p1, p2) == ("p0", "p1", "p2") and d0 == [{"p0": "delta"}] and d1 == d2 == []  # deltas merged once
    np.testing.assert_allclose(f0, 1.0)
    np.testing.assert_allclose(f1, np.exp(2 * 0.5), rtol=1e-6)  # both of p0's agents at each step
    np.testing.assert_allclose(f2, np.exp(2 * 0.5 - 0.25), rtol=1e-6)
    assert set(results.stats) == {"p0", "p1", "p2"} and results.stats["p1"]["factor_mean"] == pytest.approx(np.exp(1.0))
    assert metrics.counters["learner_updates"] == 3 and metrics.counters["env_steps_trained"] == 2


def test_the_order_is_drawn_anew_each_iteration():
    config = _config().multi_agent(policies=["p0", "p1", "p2"], policy_mapping_fn={"*": "p0"})
    metrics = SharedMetrics()
    ctx = ExecutionContext(config, None, None, metrics, policy_specs={p: None for p in ["p0", "p1", "p2"]})
    batch = MultiAgentBatch({p: _rows([1], [0]) for p in ["p0", "p1", "p2"]}, 1)
    records = [SampledBatch(batch) for _ in range(12)]
    orders = [tuple(r.order) for r in AgentOrder().build(ctx, [LocalIterator(lambda: iter(records), metrics)])]
    assert len(set(orders)) > 2 and all(sorted(o) == ["p0", "p1", "p2"] for o in orders)


def _module_and_batch(n=64, seed=0):
    torch.manual_seed(seed)
    module = CentralCriticMLP(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4), {"state_dim": 5, "hiddens": [16]})
    obs, state = torch.randn(n, 3), torch.randn(n, 5)
    with torch.no_grad():
        dist = module.action_dist(module.forward_train({"obs": obs, "state": state})["action_dist_inputs"])
        actions = dist.sample()
        logp = dist.logp(actions)
    batch = {sb.OBS: obs, sb.STATE: state, sb.ACTIONS: actions, sb.ACTION_LOGP: logp, sb.ADVANTAGES: torch.randn(n),
             FACTOR: torch.rand(n) + 0.5}
    return module, batch


def test_the_happo_loss_refuses_a_batch_without_the_factor():
    module, batch = _module_and_batch()
    batch.update({sb.VF_PREDS: torch.zeros(64), sb.VALUE_TARGETS: torch.zeros(64)})
    cfg = _config().training_cfg
    loss, stats = happo_loss(module, batch, cfg)
    assert torch.isfinite(loss) and float(stats["factor_mean"]) == pytest.approx(float(batch[FACTOR].mean()))
    del batch[FACTOR]
    with pytest.raises(ValueError, match="happo_factor"):
        happo_loss(module, batch, cfg)


def test_conjugate_gradient_solves_a_positive_definite_system():
    a = torch.randn(6, 6, dtype=torch.float64)
    h, b = a @ a.T + 6 * torch.eye(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    np.testing.assert_allclose(conjugate_gradient(lambda v: h @ v, b, 20), torch.linalg.solve(h, b), rtol=1e-6)


@pytest.mark.parametrize("kl_threshold", [0.01, 0.001])
def test_the_trpo_step_gains_on_the_surrogate_within_the_kl_bound(kl_threshold):
    module, batch = _module_and_batch()
    cfg = _config(HATRPOConfig, kl_threshold=kl_threshold).training_cfg
    critic = [p.detach().clone() for p in module.vf.parameters()]
    with torch.no_grad():
        old = module.action_dist(module.forward_train(batch)["action_dist_inputs"])
    out = trpo_step(module, dict(batch), cfg)
    accepted, kl, gain, _ = out["hatrpo_step"][0].tolist()
    with torch.no_grad():
        new = module.action_dist(module.forward_train(batch)["action_dist_inputs"])
        measured_kl = float(old.kl(new).mean())
        weighted = batch[sb.ADVANTAGES] * batch[FACTOR]
        surrogate = float(((new.logp(batch[sb.ACTIONS]) - batch[sb.ACTION_LOGP]).exp() * weighted).mean() - weighted.mean())
    assert accepted > 0 and 0 < measured_kl <= kl_threshold and measured_kl == pytest.approx(kl, rel=1e-4)
    assert surrogate == pytest.approx(gain, rel=1e-4) and gain > 0
    assert all(torch.equal(a, b) for a, b in zip(critic, module.vf.parameters()))  # the critic is Adam's, not the step's


@pytest.mark.parametrize("cls", [HAPPOConfig, HATRPOConfig])
def test_one_iteration_updates_every_agent_once(cls):
    algo = _config(cls).build()
    try:
        result = algo.train()
        turns = sorted(result[f"losses/{a}/turn"] for a in AGENTS)
        assert turns == [0.0, 1.0, 2.0] and result["counters/learner_updates"] == 3
        assert all(result[f"counters/agent_steps_trained/{a}"] == result[f"counters/agent_steps_sampled/{a}"] for a in AGENTS)
    finally:
        algo.stop()
