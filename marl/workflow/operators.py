"""The operators a workflow graph is made of.

Each operator declares the kind of item it consumes (`consumes`, one kind per
input; empty for a source) and the kind it produces (`produces`). Operators
are generic: they know runner groups, learner groups and metrics, never a
particular algorithm. `build` turns the operator into a lazy iterator given
its inputs' iterators.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field

from marl.data import MultiAgentBatch
from marl.execution import LocalIterator, SharedMetrics, gather_async, gather_sync, union
from marl.execution import metrics as m

BATCH = "batch"
RESULTS = "results"
ANY = "any"  # an input that takes every kind (join nodes)


class LearnResults(dict):
    """Per-policy learner stats of one update, plus the `info` of the batch it trained on.

    Downstream nodes read where the data came from: `sync_weights(scope=source)`
    the runners that produced it, `update_priorities` the replay slots it filled.
    """

    def __init__(self, stats: dict | None = None, batch_info: dict | None = None):
        super().__init__(stats or {})
        self.batch_info = batch_info or {}


@dataclass
class ExecutionContext:
    """What operators act on: the runtime objects of one Algorithm."""

    config: object
    runners: object  # EnvRunnerGroup
    learners: object  # LearnerGroup
    metrics: SharedMetrics
    replay_buffers: dict = field(default_factory=dict)  # policy id -> ReplayBuffer (off-policy algorithms)
    # name -> object with get_state()/set_state(state): operator state a checkpoint keeps (report totals,
    # replay buffers, ...). State trees hold dicts, lists, numbers, strings and arrays (see state_files).
    checkpointables: dict = field(default_factory=dict)


class OperatorState(dict):
    """Plain counters an operator's iterator keeps between items (e.g. updates seen).

    An operator that has some sets `self.checkpoint_state = OperatorState(...)`
    in `build`; the workflow registers it with the checkpointables, so a
    restored run continues the count instead of starting over.
    """

    def get_state(self) -> dict:
        return dict(self)

    def set_state(self, state: dict) -> None:
        self.clear()
        self.update(state)


def operator_param_names(cls) -> list[str]:
    """The settings an operator takes: its __init__ keyword parameters."""
    if cls.__init__ is object.__init__:
        return []
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


class Operator:
    op_name: str = ""
    consumes: tuple[str, ...] = ()
    produces: str = ""
    variadic: bool = False  # accepts any number (>= 1) of inputs of kind consumes[0]

    def params(self) -> dict:
        return {name: getattr(self, name) for name in operator_param_names(type(self))}

    def check_inputs(self, kinds: list[str]) -> str | None:
        """A reason the inputs' kinds do not fit beyond `consumes`, or None (validation calls this)."""
        return None

    def build(self, ctx: ExecutionContext, inputs: list[LocalIterator]) -> LocalIterator:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


def policy_list(node: str, policies) -> list[str] | None:
    """The `policies` setting of a per-policy branch's node: null (all) or a non-empty list of policy ids."""
    if policies is None:
        return None
    if isinstance(policies, str):
        policies = [policies]
    if not isinstance(policies, (list, tuple)) or not policies:
        raise ValueError(f"{node}.policies must be a non-empty list of policy ids or null (all), got {policies!r}")
    return [str(p) for p in policies]


def select_policies(batch: MultiAgentBatch, policies: list[str] | None) -> MultiAgentBatch:
    """The batch restricted to some policies' rows (env steps and info unchanged)."""
    if policies is None:
        return batch
    return MultiAgentBatch({p: b for p, b in batch.policy_batches.items() if p in policies}, batch.env_steps, batch.info)


def _record_sample(metrics: SharedMetrics, batch: MultiAgentBatch) -> MultiAgentBatch:
    metrics.counters[m.ENV_STEPS_SAMPLED] += batch.env_steps
    metrics.counters[m.AGENT_STEPS_SAMPLED] += batch.agent_steps()
    for pid, n in batch.agent_steps_per_policy().items():
        metrics.counters[f"{m.AGENT_STEPS_SAMPLED}/{pid}"] += n
    metrics.episodes.extend(batch.info.get("episodes", []))
    return batch


class Sample(Operator):
    """Pulls rollout fragments from the env runners.

    mode=sync: every runner samples once per item and the fragments are
    concatenated (one item = one round). mode=async: items are single
    fragments in arrival order, `num_async` requests in flight per runner,
    none older than `max_policy_lag` learner updates when it is set.
    """

    op_name, consumes, produces = "sample", (), BATCH

    def __init__(self, mode: str = "sync", num_async: int = 1, max_policy_lag: int | None = None):
        if mode not in ("sync", "async"):
            raise ValueError(f"sample.mode must be 'sync' or 'async', got {mode!r}")
        if int(num_async) < 1:
            raise ValueError(f"sample.num_async must be >= 1, got {num_async}")
        if max_policy_lag is not None and int(max_policy_lag) < 1:
            raise ValueError(f"sample.max_policy_lag must be >= 1 or null, got {max_policy_lag}")
        self.mode, self.num_async = mode, int(num_async)
        self.max_policy_lag = None if max_policy_lag is None else int(max_policy_lag)

    def build(self, ctx, inputs):
        metrics = ctx.metrics
        timer = metrics.timers["sample"]

        if self.mode == "sync":
            source = gather_sync(ctx.runners, metrics)

            def concat_round(batches):
                return MultiAgentBatch.concat(batches) if len(batches) > 1 else batches[0]

            it = source.for_each(concat_round)
        else:
            learners = ctx.learners
            it = gather_async(
                ctx.runners, metrics, self.num_async, version=lambda: learners.version, max_lag=self.max_policy_lag
            ).for_each(lambda item: item[1])

        def timed():
            while True:
                with timer.timing():
                    batch = next(it)
                yield _record_sample(metrics, batch)

        return LocalIterator(timed, metrics, f"sample({self.mode})")


class ConcatBatches(Operator):
    """Accumulates batches until they hold at least `min_env_steps` env steps, then emits one."""

    op_name, consumes, produces = "concat", (BATCH,), BATCH

    def __init__(self, min_env_steps: int):
        if int(min_env_steps) < 1:
            raise ValueError(f"concat.min_env_steps must be >= 1, got {min_env_steps}")
        self.min_env_steps = int(min_env_steps)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        buffer: list[MultiAgentBatch] = []
        count = [0]

        def accumulate(batch):
            buffer.append(batch)
            count[0] += batch.env_steps
            if count[0] < self.min_env_steps:
                return []
            out = MultiAgentBatch.concat(buffer)
            buffer.clear()
            count[0] = 0
            return [out]

        return upstream.combine(accumulate)


class Learn(Operator):
    """One learner update per batch; emits the per-policy learner results (`LearnResults`).

    policies: only these policies' rows are trained on (a per-policy branch of a
    MIXED graph); null: every trained policy in the batch.
    """

    op_name, consumes, produces = "learn", (BATCH,), RESULTS

    def __init__(self, policies: list | None = None):
        self.policies = policy_list("learn", policies)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics
        timer = metrics.timers["learn"]

        def learn(batch: MultiAgentBatch) -> LearnResults:
            batch = select_policies(batch, self.policies)
            # Policy lag: learner updates between the weights that produced the data and the ones it trains.
            current = ctx.learners.version
            metrics.info.setdefault("policy_lag", []).extend(current - v for v in batch.info.get("weights_version", []))
            with timer.timing():
                results = ctx.learners.update(batch) if batch.policy_batches else {}
            if results:
                metrics.counters[m.ENV_STEPS_TRAINED] += batch.env_steps
                for pid, stats in results.items():
                    metrics.counters[f"{m.AGENT_STEPS_TRAINED}/{pid}"] += int(stats.get("agent_steps_trained", 0))
                metrics.counters[m.AGENT_STEPS_TRAINED] += sum(int(s.get("agent_steps_trained", 0)) for s in results.values())
                metrics.counters[m.LEARNER_UPDATES] += 1
                metrics.learner_results.update(results)
            return LearnResults(results, batch.info)

        return upstream.for_each(learn)


class SyncWeights(Operator):
    """Sends the learner's weights to the runners when they changed.

    scope=all: every runner; scope=source: only the runners that produced the
    batch just trained on (their next request then runs on the newest weights,
    which bounds the policy lag of asynchronous sampling).
    every=k: only on every k-th learner update (IMPALA's broadcast interval).
    """

    op_name, consumes, produces = "sync_weights", (RESULTS,), RESULTS
    SCOPES = ("all", "source")

    def __init__(self, scope: str = "all", every: int = 1):
        if scope not in self.SCOPES:
            raise ValueError(f"sync_weights.scope must be one of {list(self.SCOPES)}, got {scope!r}")
        if int(every) < 1:
            raise ValueError(f"sync_weights.every must be >= 1, got {every}")
        self.scope, self.every = scope, int(every)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics
        timer = metrics.timers["sync_weights"]
        state = self.checkpoint_state = OperatorState(updates=0)

        def sync(results):
            if not results:  # no update happened (e.g. replay not ready yet)
                return results
            state["updates"] += 1
            if state["updates"] % self.every:
                return results
            version = ctx.learners.get_version()
            if self.scope == "source":
                runners = [r - 1 for r in getattr(results, "batch_info", {}).get("runner", []) if r > 0]
                if ctx.runners.is_local or runners:
                    with timer.timing():
                        ctx.runners.sync_weights(ctx.learners.get_weights(), indices=None if ctx.runners.is_local else sorted(set(runners)))
                    metrics.counters[m.WEIGHTS_VERSION] = version
                    metrics.counters[m.WEIGHTS_SYNCS] += 1
            elif version != metrics.counters[m.WEIGHTS_VERSION]:
                with timer.timing():
                    ctx.runners.sync_weights(ctx.learners.get_weights())
                metrics.counters[m.WEIGHTS_VERSION] = version
                metrics.counters[m.WEIGHTS_SYNCS] += 1
            return results

        return upstream.for_each(sync)


class Concurrently(Operator):
    """Round-robin over several branches (weights[i] items from branch i in turn); emits what the
    branches listed in `emit` emit (default: the last branch).

    This is the join of DQN's two branches: `sample -> store` and
    `replay -> learn -> ...`, with weights set by the training intensity; and of
    a MIXED graph's per-policy branches, with `emit` naming every learning branch.
    """

    op_name, consumes, produces, variadic = "concurrently", (ANY,), RESULTS, True

    def __init__(self, weights: list | None = None, emit: list | None = None):
        self.weights = None if weights is None else [int(w) for w in weights]
        self.emit = None if emit is None else [int(i) for i in emit]

    def check_inputs(self, kinds):
        if self.emit is None and kinds and kinds[-1] != RESULTS:
            return f"its last input (whose items it emits) must carry '{RESULTS}', got '{kinds[-1]}'"
        for i in self.emit or []:
            if not 0 <= i < len(kinds):
                return f"emit {self.emit} names input {i}, but it has {len(kinds)} inputs (0-based)"
            if kinds[i] != RESULTS:
                return f"input {i} (whose items it emits) must carry '{RESULTS}', got '{kinds[i]}'"
        if self.weights is not None and len(self.weights) != len(kinds):
            return f"weights {self.weights} must give one count per input ({len(kinds)} inputs)"
        return None

    def build(self, ctx, inputs):
        tagged = [it.for_each(lambda x, i=i: (i, x)) for i, it in enumerate(inputs)]
        emitted = {len(inputs) - 1} if self.emit is None else set(self.emit)
        self.checkpoint_state = OperatorState(branch=0, taken=0)  # where the round-robin is
        return (
            union(*tagged, weights=self.weights, position=self.checkpoint_state)
            .filter(lambda item: item[0] in emitted)
            .for_each(lambda item: item[1])
        )


class Report(Operator):
    """Turns learner results into the result dict of one `train()` iteration.

    min_env_steps: an iteration goes on pulling items until at least this many
    env steps were sampled in it (DQN takes many small items per iteration);
    per-policy learner stats are averaged over the iteration's updates.
    """

    op_name, consumes, produces = "report", (RESULTS,), "report"

    def __init__(self, min_env_steps: int = 0):
        if int(min_env_steps) < 0:
            raise ValueError(f"report.min_env_steps must be >= 0, got {min_env_steps}")
        self.min_env_steps = int(min_env_steps)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        from marl.workflow.report import ResultBuilder, average_results

        builder = ResultBuilder(ctx)
        counters = ctx.metrics.counters

        def gen():
            while True:
                started = time.perf_counter()  # iteration time counts from the pull, not between train() calls
                first = counters[m.ENV_STEPS_SAMPLED]
                items = [next(upstream)]
                while counters[m.ENV_STEPS_SAMPLED] - first < self.min_env_steps:
                    items.append(next(upstream))
                yield builder.build(average_results(items), started, time.perf_counter())

        return LocalIterator(gen, ctx.metrics, "report")


OPERATORS: dict[str, type[Operator]] = {
    cls.op_name: cls for cls in (Sample, ConcatBatches, Learn, SyncWeights, Concurrently, Report)
}  # the replay operators register themselves in marl.workflow.replay_ops


def register_operator(cls: type[Operator]) -> type[Operator]:
    """Makes an operator class usable by name in YAML workflows."""
    OPERATORS[cls.op_name] = cls
    return cls
