"""The workflow graph: PPO's shape, YAML form, validation errors, custom graphs that run."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest

import marl
from marl.execution import SharedMetrics, gather_sync, union
from marl.execution.iterators import LocalIterator
from marl.workflow import Workflow, WorkflowError

PPO_YAML = {
    "nodes": {
        "sample": {"op": "sample", "mode": "sync"},
        "concat": {"op": "concat", "min_env_steps": 256, "after": "sample"},
        "learn": {"op": "learn", "after": "concat"},
        "sync": {"op": "sync_weights", "scope": "all", "after": "learn"},
        "report": {"op": "report", "after": "sync"},
    }
}


def small_cartpole():
    return (
        marl.PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
        .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
        .debugging(seed=0)
    )


def test_ppo_default_graph_has_five_operators_in_order():
    wf = small_cartpole().default_workflow().validate()
    g = wf.graph
    assert isinstance(g, nx.DiGraph)
    assert {n: g.nodes[n]["op"] for n in g} == {
        "sample": "sample",
        "concat": "concat",
        "learn": "learn",
        "sync_weights": "sync_weights",
        "report": "report",
    }
    assert list(nx.topological_sort(g)) == ["sample", "concat", "learn", "sync_weights", "report"]
    assert {(u, v): d["kind"] for u, v, d in g.edges(data=True)} == {
        ("sample", "concat"): "batch",
        ("concat", "learn"): "batch",
        ("learn", "sync_weights"): "results",
        ("sync_weights", "report"): "results",
    }
    assert g.nodes["concat"]["params"] == {"min_env_steps": 128}


def test_yaml_form_round_trips():
    wf = Workflow.from_dict(PPO_YAML).validate()
    again = Workflow.from_dict(wf.to_dict()).validate()
    assert nx.utils.graphs_equal(nx.DiGraph(wf.graph.edges), nx.DiGraph(again.graph.edges))
    assert again.graph.nodes["concat"]["params"] == {"min_env_steps": 256}


def _bad(change):
    spec = {"nodes": {k: dict(v) for k, v in PPO_YAML["nodes"].items()}}
    change(spec["nodes"])
    return spec


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda n: n["sample"].update(after="sync"), "cycle"),  # sample is a source: named first
        (lambda n: n["concat"].update(after="sync"), "cycle"),
        (lambda n: n["learn"].update(after="sync"), "cycle"),
        (lambda n: n.update(extra={"op": "learn", "after": "learn"}), "extra"),
        (lambda n: n["sync"].update(after="concat"), "'concat' -> 'sync' carries 'batch'"),
        (lambda n: n["learn"].update(op="lern"), "unknown operator 'lern'"),
        (lambda n: n["concat"].update(min_steps=3), "unknown parameter(s) ['min_steps']"),
        (lambda n: n["concat"].update(after="nowhere"), "'nowhere'"),
        (lambda n: n.pop("report"), "exactly one 'report'"),
        (lambda n: n["sample"].update(mode="sometimes"), "'sample'"),
        (lambda n: n["learn"].pop("op"), "'learn' needs an 'op'"),
    ],
)
def test_malformed_yaml_workflow_names_the_problem(change, expected):
    with pytest.raises(WorkflowError) as err:
        Workflow.from_dict(_bad(change)).validate()
    assert expected in str(err.value)


def test_cycle_message_names_nodes():
    spec = _bad(lambda n: n["concat"].update(after="sync"))
    with pytest.raises(WorkflowError, match=r"cycle: .*concat.*learn.*sync"):
        Workflow.from_dict(spec).validate()


def test_yaml_workflow_runs_and_is_the_graph_being_run():
    config = small_cartpole().with_workflow(PPO_YAML)
    algo = config.build()
    try:
        result = algo.train()
        assert result["env_steps_total"] >= 256  # concat waited for min_env_steps
        assert algo.workflow.graph.nodes["concat"]["params"]["min_env_steps"] == 256
        assert result["losses/default_policy/num_sgd_steps"] > 0
    finally:
        algo.stop()


def test_scenario_workflow_interpolates_config(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        """
algo: PPO
environment: {env: CartPole-v1}
env_runners: {num_envs_per_env_runner: 2, rollout_fragment_length: 16}
training: {train_batch_size: 96, minibatch_size: 32, num_epochs: 1}
workflow:
  nodes:
    sample: {op: sample}
    concat: {op: concat, min_env_steps: "${training.train_batch_size}", after: sample}
    learn: {op: learn, after: concat}
    report: {op: report, after: learn}
"""
    )
    algo = marl.load_scenario(path).build()
    try:
        assert algo.workflow.graph.nodes["concat"]["params"]["min_env_steps"] == 96
        assert algo.train()["env_steps_total"] == 96
    finally:
        algo.stop()


def test_two_learn_steps_per_sample_via_python_graph():
    """A user changes the schedule by editing the graph: two learner updates on each batch."""
    from marl.workflow import ConcatBatches, Concurrently, Learn, Report, Sample, SyncWeights

    config = small_cartpole()
    wf = (
        Workflow("twice")
        .add("sample", Sample())
        .add("concat", ConcatBatches(min_env_steps=128), after="sample")
        .add("learn_a", Learn(), after="concat")
        .add("learn_b", Learn(), after="concat")  # fan-out: both branches see every batch
        .add("join", Concurrently(), after=["learn_a", "learn_b"])
        .add("sync", SyncWeights(), after="join")
        .add("report", Report(), after="sync")
    )
    algo = config.with_workflow(wf).build()
    try:
        algo.train()
        result = algo.train()
        assert result["counters/learner_updates"] == 2 * result["env_steps_total"] // 128
    finally:
        algo.stop()


def test_union_round_robin_weights():
    metrics = SharedMetrics()
    a = LocalIterator(lambda: itertools.repeat("a"), metrics)
    b = LocalIterator(lambda: itertools.repeat("b"), metrics)
    assert union(a, b, weights=[1, 3]).take(8) == list("abbbabbb")
    with pytest.raises(ValueError):
        union(a, b, weights=[1])


def test_gather_sync_collects_one_item_per_runner():
    class FakeGroup:
        is_local = False
        calls = 0

        def call_all(self, method):
            FakeGroup.calls += 1
            return [f"{method}-{i}-{FakeGroup.calls}" for i in range(3)]

    it = gather_sync(FakeGroup(), SharedMetrics())
    assert next(it) == ["sample-0-1", "sample-1-1", "sample-2-1"]
    assert next(it)[2] == "sample-2-2"


ASYNC_YAML = {
    "nodes": {
        "sample": {"op": "sample", "mode": "async", "num_async": 1, "max_policy_lag": 2},
        "concat": {"op": "concat", "min_env_steps": 64, "after": "sample"},
        "learn": {"op": "learn", "after": "concat"},
        "sync": {"op": "sync_weights", "after": "learn"},
        "report": {"op": "report", "after": "sync"},
    }
}


def test_async_sampling_in_process_uses_the_same_graph():
    algo = small_cartpole().with_workflow(ASYNC_YAML).build()
    try:
        r = algo.train()
        assert r["env_steps_total"] == 64 and r["perf/policy_lag_max"] == 0
    finally:
        algo.stop()


def test_async_sampling_on_ray_runners_bounds_policy_lag(ray_session):
    algo = small_cartpole().env_runners(num_env_runners=2).with_workflow(ASYNC_YAML).build()
    try:
        lags = []
        # A runner actor's first fragment can take a while on a loaded machine (torch warm-up):
        # go on until both runners' data has been trained on, not for a fixed number of iterations.
        while len(lags) < 40 and (len(lags) < 6 or max(lags) < 1):
            lags.append(algo.train()["perf/policy_lag_max"])
    finally:
        algo.stop()
    # 2 runners x 1 request in flight, and max_policy_lag=2: a request about to age past the bound
    # is waited for ahead of newer ones, so no data is more than 2 updates old.
    assert max(lags) >= 1, "asynchronous sampling should show some lag"
    assert max(lags) <= 2 * 1, lags


def test_dqn_workflow_round_trips_through_yaml_and_runs():
    from marl import DQNConfig

    cfg = DQNConfig().environment("CartPole-v1").training(num_steps_sampled_before_learning_starts=32,
                                                           min_env_steps_per_iteration=256)
    spec = cfg.default_workflow().to_dict()
    again = Workflow.from_dict(spec)
    assert again.to_dict() == spec
    algo = cfg.copy().with_workflow(spec).build()
    try:
        result = algo.train()
        assert result["counters/learner_updates"] > 0
        assert result["env_steps_this_iter"] >= 256
    finally:
        algo.stop()


def test_concurrently_must_emit_results_from_its_last_branch():
    from marl.workflow import Concurrently, Learn, Replay, Report, Sample, StoreToReplay

    wf = (
        Workflow("bad")
        .add("sample", Sample())
        .add("store", StoreToReplay(), after="sample")
        .add("replay", Replay(batch_size=8))
        .add("learn", Learn(), after="replay")
        .add("join", Concurrently(weights=[1, 1]), after=["learn", "store"])
        .add("report", Report(), after="join")
    )
    with pytest.raises(WorkflowError, match=r"'join'.*last input.*'results'.*'stored'"):
        wf.validate()
    wf2 = (
        Workflow("bad2")
        .add("sample", Sample())
        .add("store", StoreToReplay(), after="sample")
        .add("replay", Replay(batch_size=8))
        .add("learn", Learn(), after="replay")
        .add("join", Concurrently(weights=[1, 2, 3]), after=["store", "learn"])
        .add("report", Report(), after="join")
    )
    with pytest.raises(WorkflowError, match=r"weights \[1, 2, 3\].*2 inputs"):
        wf2.validate()


def test_replay_ops_reject_bad_parameters():
    from marl.workflow import Replay, StoreToReplay, UpdateTarget

    with pytest.raises(ValueError, match="n_step"):
        StoreToReplay(n_step=0)
    with pytest.raises(ValueError, match="batch_size"):
        Replay(batch_size=0)
    with pytest.raises(ValueError, match="tau"):
        UpdateTarget(tau=0)
