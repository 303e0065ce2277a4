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


@dataclass
class ExecutionContext:
    """What operators act on: the runtime objects of one Algorithm."""

    config: object
    runners: object  # EnvRunnerGroup
    learners: object  # LearnerGroup
    metrics: SharedMetrics
    # name -> object with get_state()/set_state(state): operator state a checkpoint keeps (report totals,
    # replay buffers, ...). State trees hold dicts, lists, numbers, strings and arrays (see state_files).
    checkpointables: dict = field(default_factory=dict)


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

    def build(self, ctx: ExecutionContext, inputs: list[LocalIterator]) -> LocalIterator:
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


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
    fragments in arrival order, `num_async` requests in flight per runner.
    """

    op_name, consumes, produces = "sample", (), BATCH

    def __init__(self, mode: str = "sync", num_async: int = 1):
        if mode not in ("sync", "async"):
            raise ValueError(f"sample.mode must be 'sync' or 'async', got {mode!r}")
        self.mode, self.num_async = mode, int(num_async)

    def build(self, ctx, inputs):
        metrics = ctx.metrics
        timer = metrics.timers["sample"]

        if self.mode == "sync":
            source = gather_sync(ctx.runners, metrics)

            def concat_round(batches):
                return MultiAgentBatch.concat(batches) if len(batches) > 1 else batches[0]

            it = source.for_each(concat_round)
        else:
            it = gather_async(ctx.runners, metrics, self.num_async).for_each(lambda item: item[1])

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
    """One learner update per batch; emits the per-policy learner results."""

    op_name, consumes, produces = "learn", (BATCH,), RESULTS

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics
        timer = metrics.timers["learn"]

        def learn(batch: MultiAgentBatch) -> dict:
            # Policy lag: weights versions between the data's producer and the learner that trains on it.
            current = metrics.counters[m.WEIGHTS_VERSION]
            metrics.info.setdefault("policy_lag", []).extend(current - v for v in batch.info.get("weights_version", []))
            with timer.timing():
                results = ctx.learners.update(batch)
            metrics.counters[m.ENV_STEPS_TRAINED] += batch.env_steps
            for pid, stats in results.items():
                metrics.counters[f"{m.AGENT_STEPS_TRAINED}/{pid}"] += int(stats.get("agent_steps_trained", 0))
            metrics.counters[m.AGENT_STEPS_TRAINED] += sum(int(s.get("agent_steps_trained", 0)) for s in results.values())
            metrics.counters[m.LEARNER_UPDATES] += 1
            metrics.learner_results.update(results)
            return results

        return upstream.for_each(learn)


class SyncWeights(Operator):
    """Sends the learner's weights to the runners when they changed.

    scope=all: every runner; every=k: only on every k-th incoming item.
    """

    op_name, consumes, produces = "sync_weights", (RESULTS,), RESULTS

    def __init__(self, scope: str = "all", every: int = 1):
        if scope not in ("all",):
            raise ValueError(f"sync_weights.scope must be 'all', got {scope!r}")
        if int(every) < 1:
            raise ValueError(f"sync_weights.every must be >= 1, got {every}")
        self.scope, self.every = scope, int(every)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics
        timer = metrics.timers["sync_weights"]
        seen = [0]

        def sync(results):
            seen[0] += 1
            if seen[0] % self.every == 0:
                version = ctx.learners.get_version()
                if version != metrics.counters[m.WEIGHTS_VERSION]:
                    with timer.timing():
                        ctx.runners.sync_weights(ctx.learners.get_weights())
                    metrics.counters[m.WEIGHTS_VERSION] = version
                    metrics.counters[m.WEIGHTS_SYNCS] += 1
            return results

        return upstream.for_each(sync)


class Concurrently(Operator):
    """Round-robin over several branches (weights[i] items from branch i in turn); emits what the last branch emits."""

    op_name, consumes, produces, variadic = "concurrently", (RESULTS,), RESULTS, True

    def __init__(self, weights: list | None = None):
        self.weights = None if weights is None else [int(w) for w in weights]

    def build(self, ctx, inputs):
        tagged = [it.for_each(lambda x, i=i: (i, x)) for i, it in enumerate(inputs)]
        last = len(inputs) - 1
        return union(*tagged, weights=self.weights).filter(lambda item: item[0] == last).for_each(lambda item: item[1])


class Report(Operator):
    """Turns learner results into the result dict of one `train()` iteration."""

    op_name, consumes, produces = "report", (RESULTS,), "report"

    def build(self, ctx, inputs):
        (upstream,) = inputs
        from marl.workflow.report import ResultBuilder

        builder = ResultBuilder(ctx)

        def gen():
            while True:
                started = time.perf_counter()  # iteration time counts from the pull, not between train() calls
                results = next(upstream)
                yield builder.build(results, started, time.perf_counter())

        return LocalIterator(gen, ctx.metrics, "report")


OPERATORS: dict[str, type[Operator]] = {
    cls.op_name: cls for cls in (Sample, ConcatBatches, Learn, SyncWeights, Concurrently, Report)
}


def register_operator(cls: type[Operator]) -> type[Operator]:
    """Makes an operator class usable by name in YAML workflows."""
    OPERATORS[cls.op_name] = cls
    return cls
