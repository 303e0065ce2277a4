"""Lazy iterators over actors: the runtime the workflow graph compiles into.

A `LocalIterator` is a pull-based chain of Python generators carrying the
workflow's `SharedMetrics`. Sources pull from a runner group: `gather_sync`
asks every runner for one item and waits for all; `gather_async` keeps
`num_async` requests in flight per runner and yields items as they finish
(`ray.wait`). In-process (no Ray) the same calls run the local runner
directly, so one workflow serves both.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from marl.execution.metrics import SharedMetrics

T = TypeVar("T")
U = TypeVar("U")


class LocalIterator(Generic[T]):
    def __init__(self, make: Callable[[], Iterator[T]], metrics: SharedMetrics, name: str = "source"):
        self._make = make
        self._it: Iterator[T] | None = None
        self.metrics = metrics
        self.name = name

    def __iter__(self) -> "LocalIterator[T]":
        return self

    def __next__(self) -> T:
        if self._it is None:
            self._it = iter(self._make())
        return next(self._it)

    def _chain(self, gen: Callable[[], Iterable[U]], name: str) -> "LocalIterator[U]":
        return LocalIterator(gen, self.metrics, f"{self.name}.{name}")

    def for_each(self, fn: Callable[[T], U]) -> "LocalIterator[U]":
        return self._chain(lambda: map(fn, self), f"for_each({getattr(fn, '__name__', 'fn')})")

    def filter(self, pred: Callable[[T], bool]) -> "LocalIterator[T]":
        return self._chain(lambda: filter(pred, self), "filter")

    def flatten(self) -> "LocalIterator":
        return self._chain(lambda: (x for items in self for x in items), "flatten")

    def combine(self, fn: Callable[[T], list[U]]) -> "LocalIterator[U]":
        """fn returns a list of zero or more outputs per input (an accumulator, say)."""
        return self.for_each(fn).flatten()

    def take(self, n: int) -> list[T]:
        return list(itertools.islice(self, n))

    def duplicate(self, n: int, copy: Callable[[T], T]) -> list["LocalIterator[T]"]:
        """n iterators over the same items (fan-out); items wait until every branch pulled them.

        Branch 0 gets each item itself, every other branch `copy(item)`, made when the
        item arrives: no branch sees what another does to its item in place.
        """

        def with_copies():
            for item in self:
                yield (item,) + tuple(copy(item) for _ in range(n - 1))

        tuples = itertools.tee(with_copies(), n)
        return [
            LocalIterator(lambda i=i, t=t: (items[i] for items in t), self.metrics, f"{self.name}.copy{i}")
            for i, t in enumerate(tuples)
        ]


def union(*its: LocalIterator, weights: list[int] | None = None, position: dict | None = None) -> LocalIterator:
    """Round-robin over several iterators, pulling `weights[i]` items from iterator i in turn.

    This is how two branches of a graph (say DQN's store and learn branches)
    interleave: `weights=[1, 4]` pulls four learn results per stored batch.
    `position` ({"branch": i, "taken": j}, updated as items are pulled) lets a
    restored run continue the round where it stopped.
    """
    if not its:
        raise ValueError("union of no iterators")
    weights = weights or [1] * len(its)
    if len(weights) != len(its) or any(w < 1 for w in weights):
        raise ValueError(f"union weights must be one positive int per input, got {weights} for {len(its)} inputs")

    pos = {"branch": 0, "taken": 0} if position is None else position

    def gen():
        while True:
            while pos["branch"] < len(its):
                it, w = its[pos["branch"]], weights[pos["branch"]]
                while pos["taken"] < w:
                    item = next(it)
                    pos["taken"] += 1
                    yield item
                pos["branch"] += 1
                pos["taken"] = 0
            pos["branch"] = 0

    return LocalIterator(gen, its[0].metrics, "union(" + ", ".join(i.name for i in its) + ")")


def gather_sync(group, metrics: SharedMetrics, method: str = "sample") -> LocalIterator[list[Any]]:
    """Each item is the list of one `method()` result per runner, all from the same round."""

    def gen():
        while True:
            yield group.call_all(method)

    return LocalIterator(gen, metrics, f"gather_sync({method})")


class GatherAhead:
    """`gather_sync` one round ahead: the next round's calls go out before this round is handed on.

    Each item is the list of one `method()` result per runner, all from the same round, as with
    `gather_sync`; but each runner is asked for round k+1 as soon as its round-k result is in (a
    runner that finishes first does not idle until the slowest one does), all before round k is
    yielded, so the runners sample round k+1 while the consumer (the learner) works on round k.
    Weights synced during that work are queued behind round k+1's calls (actor calls run in order)
    and reach round k+2: the rounds lag the learner by one update at most. Runners must be remote actors.

    `settle()` waits for the round in flight and keeps its results as the next item (a
    checkpoint saves them; `ready` set after a restore is handed on first).
    """

    def __init__(self, group, metrics: SharedMetrics, method: str = "sample"):
        if group.is_local:
            raise ValueError("sampling ahead needs remote runners (num_env_runners >= 1)")
        self.group, self.method = group, method
        self.in_flight: list | None = None  # refs of the round being sampled, in runner order
        self.ready: list | None = None  # results of a finished round not yet handed on
        self.iterator = LocalIterator(self._gen, metrics, f"gather_ahead({method})")

    def _send(self) -> None:
        self.in_flight = [self.group.call_remote(i, self.method) for i in range(self.group.num_remote)]

    def settle(self) -> list | None:
        """The next round's results, waiting for the calls in flight if needed (None before the first pull)."""
        if self.ready is None and self.in_flight is not None:
            refs, self.in_flight = self.in_flight, None
            self.ready = [self.group.get_remote(i, ref, self.method) for i, ref in enumerate(refs)]
        return self.ready

    def _gen(self):
        while True:
            if self.ready is None and self.in_flight is None:
                self._send()
            if self.ready is not None:  # settled for a checkpoint, or restored from one
                results, self.ready = self.ready, None
                self._send()  # the next round samples while the consumer works on this one
            else:
                results = self._collect_and_resend()
            yield results

    def _collect_and_resend(self) -> list:
        """The round in flight, in runner order; each runner gets its next call as its result arrives."""
        import ray

        refs = self.in_flight  # updated in place: each slot always holds its runner's oldest unanswered call
        results: list = [None] * len(refs)
        waiting = {ref: i for i, ref in enumerate(refs)}
        while waiting:
            (ref,), _ = ray.wait(list(waiting), num_returns=1)
            i = waiting.pop(ref)
            results[i] = self.group.get_remote(i, ref, self.method)
            refs[i] = self.group.call_remote(i, self.method)
        return results


def gather_async(
    group,
    metrics: SharedMetrics,
    num_async: int = 1,
    method: str = "sample",
    version: Callable[[], int] | None = None,
    max_lag: int | None = None,
) -> LocalIterator:
    """Yields (runner index, result) as results arrive, keeping `num_async` calls in flight per runner.

    With `version` (the learner's weights version) and `max_lag`, no request is
    left behind: a request's age is the learner's version minus the version of
    the weights its runner acts with (`group.versions`). When the k-th oldest
    request in flight is within k updates of `max_lag`, the next item is the
    oldest request's result, however many newer ones are ready (a stalled runner
    stalls the pipeline instead of feeding it stale data). The bound can hold
    only if `max_lag` >= the number of requests in flight.
    """
    if num_async < 1:
        raise ValueError(f"num_async must be >= 1, got {num_async}")
    if max_lag is not None and max_lag < 1:
        raise ValueError(f"max_lag must be >= 1, got {max_lag}")
    if group.is_local:

        def local_gen():
            while True:
                yield 0, group.call_all(method)[0]

        return LocalIterator(local_gen, metrics, f"gather_async({method})")

    import ray

    now = version or (lambda: 0)

    def stamp(index: int) -> int:
        # The weights version the request will run with (weights are queued ahead of it).
        return group.versions[index] if version is not None else 0

    def gen():
        in_flight: dict = {}  # ref -> (runner index, version when requested)
        for index in range(group.num_remote):
            for _ in range(num_async):
                in_flight[group.call_remote(index, method)] = (index, stamp(index))
        refill = None
        while True:
            # The runner whose result we yielded last is asked again only now, when the consumer
            # comes back for more: by then it has trained on that result and queued fresh weights
            # to the runner ahead of this request (actor calls run in order).
            if refill is not None:
                in_flight[group.call_remote(refill, method)] = (refill, stamp(refill))
            # The k-th oldest request may wait k more items (each item can cost one learner update):
            # once any of them could not make it within max_lag, take the oldest first.
            by_age = sorted(in_flight, key=lambda r: in_flight[r][1])
            current = now()
            if max_lag is not None and any(current - in_flight[r][1] + k >= max_lag for k, r in enumerate(by_age)):
                ref = by_age[0]
                ray.wait([ref], num_returns=1)
            else:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                ref = ready[0]
            refill, _ = in_flight.pop(ref)
            result = group.get_remote(refill, ref, method)
            yield refill, result

    return LocalIterator(gen, metrics, f"gather_async({method}, num_async={num_async})")
