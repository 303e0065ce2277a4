"""What flows on the edges of a workflow graph: one record type per edge kind, declared here once.

They live in the data layer because runners make them (`EnvRunner.sample()` returns a
`SampledBatch`) and runners sit above the workflow layer.

    kind        record            made by                      carries
    batch       SampledBatch      sample, concat, replay       the rows and where they came from
    results     LearnResults      learn (and what follows it)  learner stats, per-row stats, their source
    stored      Stored            store_to_replay              transitions added per policy
    evaluation  EvaluationRun     evaluate                     one evaluation's results (read when done)
    report      dict              report                       the result of one `train()` iteration

Everything an operator downstream needs travels in the record (no side
channels): the weights versions a batch was sampled with, the runners that
produced it, the connector deltas for the learner, the replay slots it came
from. `SKIP` is the item an operator that declares `may_skip` emits when it
has nothing this time (e.g. `replay` before `learning_starts`): it keeps the
branch's turn in a round-robin join, operators below pass it on, `report`
drops it. Records are created once per fragment or update, never per env step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from marl.data import MultiAgentBatch, SampleBatch

BATCH = "batch"
RESULTS = "results"
STORED = "stored"
EVALUATION = "evaluation"
REPORT = "report"
ANY = "any"  # an input that takes every kind (join nodes)


class _Skip:
    """Nothing this time (see the module doc); one instance, `SKIP`, compared with `is`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SKIP"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


SKIP = _Skip()


@dataclass(slots=True)
class SampledBatch:
    """kind `batch`: rows of every policy plus where they came from (one list entry per sample call)."""

    batch: MultiAgentBatch
    episodes: list[dict] = field(default_factory=list)  # metrics of the episodes that finished while sampling
    weights_versions: list[int] = field(default_factory=list)  # weights version each sample call acted with
    runners: list[int] = field(default_factory=list)  # worker index of each sample call (0: in-process runner)
    connector_deltas: list[dict] = field(default_factory=list)  # per sample call: {policy: filter-statistics delta}
    replay_indexes: dict[str, np.ndarray] = field(default_factory=dict)  # replayed rows: their buffer slots per policy

    @property
    def env_steps(self) -> int:
        return self.batch.env_steps

    def __getitem__(self, policy_id: str) -> SampleBatch:
        return self.batch[policy_id]

    @staticmethod
    def concat(records: list["SampledBatch"]) -> "SampledBatch":
        """One record of several sample calls' records: rows concatenated, metadata lists joined in order."""
        if len(records) == 1:
            return records[0]
        if any(r.replay_indexes for r in records):
            raise ValueError("replayed batches cannot be concatenated: their replay indexes would no longer match rows")
        return SampledBatch(
            MultiAgentBatch.concat([r.batch for r in records]),
            [e for r in records for e in r.episodes],
            [v for r in records for v in r.weights_versions],
            [i for r in records for i in r.runners],
            [d for r in records for d in r.connector_deltas],
        )

    def select(self, policies: list[str] | None) -> "SampledBatch":
        """The record restricted to some policies' rows (null: all); env steps and metadata unchanged."""
        if policies is None:
            return self
        batch = MultiAgentBatch({p: b for p, b in self.batch.policy_batches.items() if p in policies}, self.batch.env_steps)
        indexes = {p: i for p, i in self.replay_indexes.items() if p in policies}
        return SampledBatch(batch, self.episodes, self.weights_versions, self.runners, self.connector_deltas, indexes)

    def to_state(self) -> dict:
        """The record as a state tree (dicts, lists, arrays: `marl.checkpoint.state_files`), for checkpoints."""
        batch = self.batch.to_numpy()  # checkpoints hold NumPy (a batched runner's rows come as tensors)
        return {
            "env_steps": batch.env_steps,
            "policies": {pid: dict(b.columns) for pid, b in batch.policy_batches.items()},
            # Tables too (MAPPO's global state, a stateful module's chunk-start states): rows index into them.
            "tables": {pid: dict(b.tables) for pid, b in batch.policy_batches.items() if b.tables},
            "episodes": list(self.episodes), "weights_versions": list(self.weights_versions),
            "runners": list(self.runners), "connector_deltas": list(self.connector_deltas),
            "replay_indexes": dict(self.replay_indexes),
        }

    @classmethod
    def from_state(cls, state: dict) -> "SampledBatch":
        tables = state.get("tables", {})
        batch = MultiAgentBatch({pid: SampleBatch(cols, tables.get(pid)) for pid, cols in state["policies"].items()},
                                int(state["env_steps"]))
        return cls(batch, list(state["episodes"]), [int(v) for v in state["weights_versions"]],
                   [int(r) for r in state["runners"]], list(state["connector_deltas"]), dict(state["replay_indexes"]))

    def copy(self) -> "SampledBatch":
        """A deep copy: what a second branch of a fan-out gets, so no branch sees another's in-place changes."""
        batch = MultiAgentBatch({p: b.copy() for p, b in self.batch.policy_batches.items()}, self.batch.env_steps)
        return SampledBatch(
            batch, copy.deepcopy(self.episodes), list(self.weights_versions), list(self.runners),
            copy.deepcopy(self.connector_deltas), {p: i.copy() for p, i in self.replay_indexes.items()},
        )


@dataclass(slots=True)
class LearnResults:
    """kind `results`: one learner update, with the source metadata of the batch it trained on."""

    stats: dict[str, dict[str, float]]  # policy -> scalar stats (losses, agent_steps_trained, ...)
    per_row: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # policy -> stat -> value per row, batch order
    runners: list[int] = field(default_factory=list)  # which runners produced the batch (sync_weights scope=source)
    replay_indexes: dict[str, np.ndarray] = field(default_factory=dict)  # replay slots of the rows (update_priorities)
    policy_lags: list[int] = field(default_factory=list)  # learner updates between sampling weights and these
    extra: dict[str, float] = field(default_factory=dict)  # iteration results operators add (self-play); latest wins

    @classmethod
    def from_update(cls, update: dict, source: SampledBatch, policy_lags: list[int] | None = None) -> "LearnResults":
        """Splits the learner's `{policy: {stat: float | ndarray}}` into scalar and per-row stats."""
        stats, per_row = {}, {}
        for pid, values in update.items():
            stats[pid] = {k: v for k, v in values.items() if not (isinstance(v, np.ndarray) and v.ndim > 0)}
            rows = {k: v for k, v in values.items() if isinstance(v, np.ndarray) and v.ndim > 0}
            if rows:
                per_row[pid] = rows
        return cls(stats, per_row, list(source.runners), dict(source.replay_indexes), list(policy_lags or []))

    def copy(self) -> "LearnResults":
        return LearnResults(
            {p: dict(s) for p, s in self.stats.items()},
            {p: {k: v.copy() for k, v in rows.items()} for p, rows in self.per_row.items()},
            list(self.runners), {p: i.copy() for p, i in self.replay_indexes.items()},
            list(self.policy_lags), dict(self.extra),
        )


@dataclass(slots=True)
class Stored:
    """kind `stored`: transitions added to each policy's replay buffer."""

    counts: dict[str, int]

    def copy(self) -> "Stored":
        return Stored(dict(self.counts))


class EvaluationRun:
    """kind `evaluation`: one evaluation, possibly still running; `results()` waits for its `evaluation/...` keys.

    A record that is a handle: `report` pulls it when an iteration starts and
    reads it when the iteration's training is done, so an evaluation launched
    at the pull runs in parallel with training, one launched at the read after it.
    """

    __slots__ = ("_collect",)

    def __init__(self, collect: Callable[[], dict]):
        self._collect = collect

    def results(self) -> dict:
        return self._collect()

    def copy(self) -> "EvaluationRun":
        return self  # read once, by whichever branch reads it; holds no data to mutate


# The record type each kind carries: checked on every item a node emits (one isinstance).
RECORD_TYPES: dict[str, type] = {
    BATCH: SampledBatch, RESULTS: LearnResults, STORED: Stored, EVALUATION: EvaluationRun, REPORT: dict,
}


def copy_record(item):
    """What a fan-out's second (third, ...) branch gets: its own copy of the item."""
    if item is SKIP:
        return item
    if isinstance(item, (SampledBatch, LearnResults, Stored, EvaluationRun)):
        return item.copy()
    return copy.deepcopy(item)  # a user-defined kind's item
