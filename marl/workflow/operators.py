"""The built-in operators of synchronous and asynchronous on-policy graphs: sample, concat, learn,
sync_weights, concurrently, report (the contract they follow: `marl.workflow.protocol`).

Operators are generic: they know runner groups, learner groups and metrics,
never a particular algorithm.
"""

from __future__ import annotations

import time

from marl.errors import ConfigError
from marl.data.records import ANY, BATCH, EVALUATION, REPORT, RESULTS, SKIP, LearnResults, SampledBatch
from marl.execution import GatherAhead, LocalIterator, SharedMetrics, gather_async, gather_sync, union
from marl.execution import metrics as m
from marl.workflow.protocol import ExecutionContext, Operator, policy_list
from marl.workflow.report import ResultBuilder

__all__ = ["ConcatBatches", "Concurrently", "ExecutionContext", "Learn", "LearnResults", "Operator", "Report", "Sample",
           "SyncWeights", "BATCH", "RESULTS", "ANY"]


def _record_sample(metrics: SharedMetrics, record: SampledBatch) -> SampledBatch:
    batch = record.batch
    metrics.counters[m.ENV_STEPS_SAMPLED] += batch.env_steps
    metrics.counters[m.AGENT_STEPS_SAMPLED] += batch.agent_steps()
    for pid, n in batch.agent_steps_per_policy().items():
        metrics.counters[f"{m.AGENT_STEPS_SAMPLED}/{pid}"] += n
    metrics.episodes.extend(record.episodes)
    return record


class Sample(Operator):
    """Pulls rollout fragments from the env runners.

    mode=sync: every runner samples once per item and the fragments are
    concatenated (one item = one round). mode=overlap: the same rounds, but
    the next round's calls go out when this one is emitted, so the remote
    runners sample it while the nodes below (the learner) work on this one:
    one round of policy lag, no more (`GatherAhead`); a checkpoint keeps the
    round in flight (`get_state` waits for it). mode=async: items are single
    fragments in arrival order, `num_async` requests in flight per runner,
    none older than `max_policy_lag` learner updates when it is set.
    """

    op_name, consumes, produces = "sample", (), BATCH
    MODES = ("sync", "overlap", "async")

    def __init__(self, mode: str = "sync", num_async: int = 1, max_policy_lag: int | None = None):
        if mode not in self.MODES:
            raise ValueError(f"sample.mode must be one of {list(self.MODES)}, got {mode!r}")
        if int(num_async) < 1:
            raise ValueError(f"sample.num_async must be >= 1, got {num_async}")
        if max_policy_lag is not None and int(max_policy_lag) < 1:
            raise ValueError(f"sample.max_policy_lag must be >= 1 or null, got {max_policy_lag}")
        self.mode, self.num_async = mode, int(num_async)
        self.max_policy_lag = None if max_policy_lag is None else int(max_policy_lag)
        self._ahead: GatherAhead | None = None
        self._restored: list | None = None

    def get_state(self) -> dict | None:
        """mode=overlap: the round sampled ahead (waited for), so a restored run emits it first; else nothing."""
        if self.mode != "overlap":
            return None
        ready = self._ahead.settle() if self._ahead is not None else self._restored
        return {"ready": None if ready is None else [record.to_state() for record in ready]}

    def set_state(self, state: dict) -> None:
        if self.mode != "overlap":
            return super().set_state(state)
        ready = state.get("ready")
        records = None if ready is None else [SampledBatch.from_state(r) for r in ready]
        if self._ahead is not None:
            self._ahead.ready = records
        self._restored = records

    def build(self, ctx, inputs):
        metrics = ctx.metrics
        timer = metrics.timers["sample"]

        if self.mode == "sync":
            it = gather_sync(ctx.runners, metrics).for_each(SampledBatch.concat)
        elif self.mode == "overlap":
            if ctx.runners.is_local:
                raise ConfigError(
                    "sample(mode=overlap) samples on remote runners beside the learner: set "
                    "'env_runners.num_env_runners' >= 1"
                )
            self._ahead, self._restored = GatherAhead(ctx.runners, metrics), None
            it = self._ahead.iterator.for_each(SampledBatch.concat)
        else:
            learners = ctx.learners
            it = gather_async(
                ctx.runners, metrics, self.num_async, version=lambda: learners.version, max_lag=self.max_policy_lag
            ).for_each(lambda item: item[1])

        def timed():
            while True:
                with timer.timing():
                    record = next(it)
                yield _record_sample(metrics, record)

        return LocalIterator(timed, metrics, f"sample({self.mode})")


class ConcatBatches(Operator):
    """Accumulates batches until they hold at least `min_agent_steps` agent steps (rows of all policies:
    one per acting agent per env step), or `min_env_steps` env steps, then emits one.

    Agent steps are what a learner update trains on and holds in memory, so a batch counted in them
    costs the same whatever the number of agents (4,096 env steps of a 162-agent battle are 663k rows).
    """

    op_name, consumes, produces, handles_skip = "concat", (BATCH,), BATCH, True

    def __init__(self, min_env_steps: int | None = None, min_agent_steps: int | None = None):
        if (min_env_steps is None) == (min_agent_steps is None):
            raise ValueError("concat takes one of min_agent_steps and min_env_steps")
        for name, value in (("min_env_steps", min_env_steps), ("min_agent_steps", min_agent_steps)):
            if value is not None and int(value) < 1:
                raise ValueError(f"concat.{name} must be >= 1, got {value}")
        self.min_env_steps = None if min_env_steps is None else int(min_env_steps)
        self.min_agent_steps = None if min_agent_steps is None else int(min_agent_steps)

    def params(self) -> dict:
        return {k: v for k, v in super().params().items() if v is not None}  # the one unit it counts

    def build(self, ctx, inputs):
        (upstream,) = inputs
        buffer: list[SampledBatch] = []
        count = [0]
        by_agent_steps = self.min_agent_steps is not None
        target = self.min_agent_steps if by_agent_steps else self.min_env_steps

        def accumulate(record):
            if record is SKIP:  # nothing to add; concat emits only full batches
                return []
            buffer.append(record)
            count[0] += record.batch.agent_steps() if by_agent_steps else record.batch.env_steps
            if count[0] < target:
                return []
            out = SampledBatch.concat(buffer)
            buffer.clear()
            count[0] = 0
            return [out]

        return upstream.combine(accumulate)


class Learn(Operator):
    """One learner update per batch; emits the update's `LearnResults` (SKIP when there was nothing to train).

    policies: only these policies' rows are trained on (a per-policy branch of a
    MIXED graph); null: every trained policy in the batch.
    """

    op_name, consumes, produces, may_skip, handles_skip = "learn", (BATCH,), RESULTS, True, True

    def __init__(self, policies: list | None = None):
        self.policies = policy_list("learn", policies)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics
        timer = metrics.timers["learn"]

        def learn(record):
            if record is SKIP:
                return SKIP
            record = record.select(self.policies)
            batch = record.batch
            if not batch.policy_batches:
                return SKIP
            # Policy lag: learner updates between the weights that produced the data and the ones it trains.
            current = ctx.learners.version
            lags = [current - v for v in record.weights_versions]
            with timer.timing():
                # the schedules' axis: env steps sampled (an offline run samples none: the env steps trained)
                steps = metrics.counters[m.ENV_STEPS_SAMPLED] or metrics.counters[m.ENV_STEPS_TRAINED]
                update = ctx.learners.update(batch, record.connector_deltas, int(steps))
            if not update:
                return SKIP
            results = LearnResults.from_update(update, record, lags)
            metrics.counters[m.ENV_STEPS_TRAINED] += batch.env_steps
            for pid, stats in results.stats.items():
                metrics.counters[f"{m.AGENT_STEPS_TRAINED}/{pid}"] += int(stats.get("agent_steps_trained", 0))
            metrics.counters[m.AGENT_STEPS_TRAINED] += sum(int(s.get("agent_steps_trained", 0)) for s in results.stats.values())
            metrics.counters[m.LEARNER_UPDATES] += 1
            return results

        return upstream.for_each(learn)


class SyncWeights(Operator):
    """Sends the learner's weights to the runners when they changed.

    scope=all: every runner; scope=source: only the runners that produced the
    batch just trained on (their next request then runs on the newest weights,
    which bounds the policy lag of asynchronous sampling).
    every=k: only on every k-th learner update (IMPALA's broadcast interval).
    """

    op_name, consumes, produces, handles_skip = "sync_weights", (RESULTS,), RESULTS, True
    SCOPES = ("all", "source")

    def __init__(self, scope: str = "all", every: int = 1):
        if scope not in self.SCOPES:
            raise ValueError(f"sync_weights.scope must be one of {list(self.SCOPES)}, got {scope!r}")
        if int(every) < 1:
            raise ValueError(f"sync_weights.every must be >= 1, got {every}")
        self.scope, self.every = scope, int(every)
        self._state = {"updates": 0}

    def get_state(self) -> dict:
        return dict(self._state)

    def set_state(self, state: dict) -> None:
        self._state.update(updates=int(state["updates"]))

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics
        timer = metrics.timers["sync_weights"]
        state = self._state = {"updates": 0}

        def sync(results):
            if results is SKIP:  # no update happened (e.g. replay not ready yet)
                return results
            state["updates"] += 1
            if state["updates"] % self.every:
                return results
            version = ctx.learners.get_version()
            if self.scope == "source":
                runners = [r - 1 for r in results.runners if r > 0]
                if ctx.runners.is_local or runners:
                    with timer.timing():
                        ctx.runners.sync_weights(ctx.learners.get_weights(on_device=True), indices=None if ctx.runners.is_local else sorted(set(runners)))
                    metrics.counters[m.WEIGHTS_VERSION] = version
                    metrics.counters[m.WEIGHTS_SYNCS] += 1
            elif version != metrics.counters[m.WEIGHTS_VERSION]:
                with timer.timing():
                    ctx.runners.sync_weights(ctx.learners.get_weights(on_device=True))
                metrics.counters[m.WEIGHTS_VERSION] = version
                metrics.counters[m.WEIGHTS_SYNCS] += 1
            return results

        return upstream.for_each(sync)


class Concurrently(Operator):
    """Round-robin over several branches (weights[i] items from branch i in turn); emits what the
    branches listed in `emit` emit (default: the last branch), SKIPs included (each is a turn).

    This is the join of DQN's two branches: `sample -> store` and
    `replay -> learn -> ...`, with weights set by the training intensity; and of
    a MIXED graph's per-policy branches, with `emit` naming every learning branch.
    """

    op_name, consumes, produces, variadic, handles_skip = "concurrently", (ANY,), RESULTS, True, True

    def __init__(self, weights: list | None = None, emit: list | None = None):
        self.weights = None if weights is None else [int(w) for w in weights]
        self.emit = None if emit is None else [int(i) for i in emit]
        self._position = {"branch": 0, "taken": 0}

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

    def get_state(self) -> dict:  # where the round-robin is: a restored run continues the round
        return dict(self._position)

    def set_state(self, state: dict) -> None:
        self._position.update(branch=int(state["branch"]), taken=int(state["taken"]))

    def build(self, ctx, inputs):
        tagged = [it.for_each(lambda x, i=i: (i, x)) for i, it in enumerate(inputs)]
        emitted = {len(inputs) - 1} if self.emit is None else set(self.emit)
        self._position = {"branch": 0, "taken": 0}
        return (
            union(*tagged, weights=self.weights, position=self._position)
            .filter(lambda item: item[0] in emitted)
            .for_each(lambda item: item[1])
        )


class Report(Operator):
    """Turns learner results into the result dict of one `train()` iteration.

    min_env_steps: an iteration goes on pulling items until at least this many
    env steps were sampled in it (DQN takes many small items per iteration);
    per-policy learner stats are averaged over the iteration's updates.
    The optional second input is an `evaluate` node: pulled when the iteration
    starts (a parallel evaluation starts then), read when its training is done.
    """

    op_name, consumes, optional_inputs, produces, handles_skip = "report", (RESULTS, EVALUATION), 1, REPORT, True

    def __init__(self, min_env_steps: int = 0):
        if int(min_env_steps) < 0:
            raise ValueError(f"report.min_env_steps must be >= 0, got {min_env_steps}")
        self.min_env_steps = int(min_env_steps)
        self._builder = None

    def get_state(self) -> dict:  # the run's totals (time_total_s, episodes_total, ...): a restored run continues them
        return self._builder.get_state()

    def set_state(self, state: dict) -> None:
        self._builder.set_state(state)

    def build(self, ctx, inputs):
        upstream, evaluation = inputs[0], (inputs[1] if len(inputs) > 1 else None)
        builder = self._builder = ResultBuilder(ctx)
        counters = ctx.metrics.counters

        def gen():
            while True:
                started = time.perf_counter()  # iteration time counts from the pull, not between train() calls
                run = next(evaluation) if evaluation is not None else SKIP
                first = counters[m.ENV_STEPS_SAMPLED]
                items = [next(upstream)]
                while counters[m.ENV_STEPS_SAMPLED] - first < self.min_env_steps:
                    items.append(next(upstream))
                result = builder.build([r for r in items if r is not SKIP], started, time.perf_counter())
                if run is not SKIP:
                    result.update(run.results())
                yield result

        return LocalIterator(gen, ctx.metrics, "report")
