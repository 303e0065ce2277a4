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
    assert g.nodes["concat"]["params"] == {"min_agent_steps": 128}


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


# -- the operator contract: records, fan-out copies, SKIP, state, evaluation node ---------------------------------
from marl.workflow import SKIP, Operator, SampledBatch  # noqa: E402
from marl.data.records import BATCH, RESULTS  # noqa: E402


class _Poison(Operator):
    """batch -> batch: overwrites every reward in place (what a careless user transform does)."""

    op_name, consumes, produces = "poison", (BATCH,), BATCH

    def build(self, ctx, inputs):
        def poison(record):
            for policy_batch in record.batch.policy_batches.values():
                policy_batch["rewards"][:] = -12345.0
            return record

        return inputs[0].for_each(poison)


class _Watch(Operator):
    """batch -> batch: remembers the smallest reward it saw."""

    op_name, consumes, produces = "watch", (BATCH,), BATCH
    seen: list = []

    def build(self, ctx, inputs):
        def watch(record):
            _Watch.seen.append(min(float(b["rewards"].min()) for b in record.batch.policy_batches.values()))
            return record

        return inputs[0].for_each(watch)


@pytest.mark.parametrize("poison_first", [True, False])
def test_a_fan_out_branch_mutating_its_batch_does_not_affect_its_sibling(poison_first):
    from marl.workflow import ConcatBatches, Concurrently, Learn, Report, Sample, SyncWeights

    _Watch.seen = []
    wf = Workflow("fan_out").add("sample", Sample()).add("concat", ConcatBatches(min_env_steps=128), after="sample")
    branches = [("poison", _Poison()), ("watch", _Watch())]
    for name, op in branches if poison_first else branches[::-1]:  # which branch gets the original, which the copy
        wf.add(name, op, after="concat").add(f"learn_{name}", Learn(), after=name)
    order = ["learn_poison", "learn_watch"] if poison_first else ["learn_watch", "learn_poison"]
    wf.add("join", Concurrently(emit=[0, 1]), after=order).add("sync", SyncWeights(), after="join")
    wf.add("report", Report(), after="sync")
    algo = small_cartpole().with_workflow(wf).build()
    try:
        for _ in range(4):  # the join emits one branch's results per iteration, in turn
            algo.train()
    finally:
        algo.stop()
    assert len(_Watch.seen) == 2 and min(_Watch.seen) == 1.0  # CartPole's rewards, never the sibling's -12345


def test_duplicate_gives_each_extra_branch_its_own_copy_when_the_item_arrives():
    import numpy as np

    metrics = SharedMetrics()
    source = LocalIterator(lambda: iter([np.zeros(3), np.zeros(3)]), metrics)
    a, b, c = source.duplicate(3, lambda x: x.copy())
    first = next(a)
    first[:] = 7  # branch a mutates before b and c pull the same item
    assert next(b).tolist() == [0, 0, 0] and next(c).tolist() == [0, 0, 0]
    assert next(b) is not next(c)


class _Passthrough(Operator):
    op_name, consumes, produces = "passthrough", (RESULTS,), RESULTS

    def build(self, ctx, inputs):
        return inputs[0]


def test_an_operator_fed_by_a_node_that_may_skip_must_handle_skip():
    from marl.workflow import Concurrently, Learn, Replay, Report, Sample, StoreToReplay

    wf = (
        Workflow("skips")
        .add("sample", Sample())
        .add("store", StoreToReplay(), after="sample")
        .add("replay", Replay(batch_size=8))
        .add("learn", Learn(), after="replay")
        .add("mine", _Passthrough(), after="learn")
        .add("join", Concurrently(weights=[1, 1]), after=["store", "mine"])
        .add("report", Report(), after="join")
    )
    with pytest.raises(WorkflowError, match=r"'learn' -> 'mine' may carry SKIP.*'mine' \(op passthrough\) does not declare handles_skip"):
        wf.validate()


def test_emitted_items_are_checked_against_the_edge_kind_and_may_skip():
    from marl.workflow import ConcatBatches, Learn, Report, Sample

    class Liar(Operator):
        op_name, consumes, produces = "liar", (BATCH,), BATCH

        def __init__(self, item=None):
            self.item = item

        def build(self, ctx, inputs):
            return inputs[0].for_each(lambda record: self.item)

    for item, message in [(SKIP, r"'liar' \(op liar\) emitted SKIP.*may_skip"),
                          ({"rows": 1}, r"'liar' \(op liar\) emitted a dict; edges of kind 'batch' carry SampledBatch")]:
        wf = (
            Workflow("liar").add("sample", Sample()).add("concat", ConcatBatches(min_env_steps=64), after="sample")
            .add("liar", Liar(item), after="concat").add("learn", Learn(), after="liar").add("report", Report(), after="learn")
        )
        algo = small_cartpole().with_workflow(wf).build()
        try:
            with pytest.raises(WorkflowError, match=message):
                algo.train()
        finally:
            algo.stop()


class _Counter(Operator):
    """results -> results, counting updates: its state is kept by checkpoints through get_state/set_state."""

    op_name, consumes, produces, handles_skip = "counter", (RESULTS,), RESULTS, True

    def __init__(self):
        self._count = {"n": 0}

    def get_state(self):
        return dict(self._count)

    def set_state(self, state):
        self._count.update(state)

    def build(self, ctx, inputs):
        count = self._count = {"n": 0}

        def tick(results):
            count["n"] += 1
            return results

        return inputs[0].for_each(tick)


def test_operator_state_goes_through_the_protocol_into_checkpoints(tmp_path):
    from marl.workflow import ConcatBatches, Learn, Report, Sample

    def workflow():
        return (
            Workflow("counted").add("sample", Sample()).add("concat", ConcatBatches(min_env_steps=64), after="sample")
            .add("learn", Learn(), after="concat").add("count", _Counter(), after="learn").add("report", Report(), after="count")
        )

    algo = small_cartpole().with_workflow(workflow()).build()
    try:
        for _ in range(3):
            algo.train()
        assert algo.context.checkpointables["workflow/count"].get_state() == {"n": 3}
        algo.save(tmp_path / "ckpt")
    finally:
        algo.stop()
    again = small_cartpole().with_workflow(workflow()).build()
    try:
        again.restore(tmp_path / "ckpt")
        again.train()
        assert again.context.checkpointables["workflow/count"].get_state() == {"n": 4}
    finally:
        again.stop()


def test_the_built_in_operator_table_is_explicit_and_users_register_their_own():
    from marl.workflow import BUILTIN_OPERATORS, OPERATORS, register_operator

    assert {"sample", "concat", "learn", "sync_weights", "concurrently", "report", "store_to_replay", "replay",
            "update_priorities", "update_target", "snapshot_opponents", "league_matches", "league_snapshot", "matchmaking",
            "evaluate", "record", "read_offline",
            "serve"} == set(BUILTIN_OPERATORS)
    register_operator(_Counter)
    assert OPERATORS["counter"] is _Counter and "counter" not in BUILTIN_OPERATORS
    with pytest.raises(ValueError, match="'learn' is a built-in operator's"):
        register_operator(type("MyLearn", (Operator,), {"op_name": "learn"}))


def test_evaluation_is_a_node_of_the_graph_being_run():
    from marl.runtime.algorithm import workflow_for

    plain = workflow_for(small_cartpole())
    assert "evaluate" not in plain.graph
    config = small_cartpole().evaluation(evaluation_interval=2, evaluation_duration=1)
    wf = workflow_for(config)
    assert wf.graph.nodes["evaluate"]["params"] == {"interval": 2, "parallel": False}
    assert wf.graph.edges["evaluate", "report"]["kind"] == "evaluation"
    assert "evaluate --evaluation--> report" in wf.describe()
    algo = config.build()
    try:
        results = [algo.train() for _ in range(2)]
        assert "evaluation/episodes" not in results[0] and results[1]["evaluation/episodes"] == 1
        assert algo.context.checkpointables["workflow/evaluate"].get_state() == {"iterations": 2}
    finally:
        algo.stop()


def test_learn_results_split_scalar_and_per_row_stats_and_keep_their_source():
    import numpy as np

    from marl.data import MultiAgentBatch
    from marl.workflow import LearnResults

    source = SampledBatch(MultiAgentBatch({}, 4), runners=[2, 3], replay_indexes={"p": np.arange(4)})
    update = {"p": {"loss": 0.5, "num_sgd_steps": 2, "td_error": np.ones(4, np.float32), "kl": np.float32(0.1)}}
    results = LearnResults.from_update(update, source, policy_lags=[1])
    assert results.stats == {"p": {"loss": 0.5, "num_sgd_steps": 2, "kl": np.float32(0.1)}}
    assert list(results.per_row["p"]) == ["td_error"]
    assert results.runners == [2, 3] and results.policy_lags == [1]
    copied = results.copy()
    copied.per_row["p"]["td_error"][:] = 0
    copied.replay_indexes["p"][:] = 0
    assert results.per_row["p"]["td_error"].tolist() == [1, 1, 1, 1] and source.replay_indexes["p"].tolist() == [0, 1, 2, 3]
