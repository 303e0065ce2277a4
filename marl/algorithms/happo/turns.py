"""The sequential update as graph nodes: the agents take turns at the learner, each against the ratios of the
agents updated before it in this iteration (Kuba et al. 2022, Algorithm 1).

    agent_order      draws this iteration's order of the trained policies (a random permutation; `shuffle: false`
                     keeps the declared order) and starts every env step's factor at 1
    learn_in_turn(k) updates the k-th policy of the order with its rows' advantages scaled by the factor at their
                     env steps, then multiplies its new/old probability ratios into those factors
    turns_done       the turns' learner results, one record for sync_weights and report

Everything travels in the record (`TurnBatch`): the order, each row's env step (rows of the same env step, keyed by
episode id and step index, share one factor), the factors in log form, the results so far. A policy with several
agents (a group) multiplies in the ratios of all of its agents at the step: the group's joint action's ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from marl.algorithms.happo.loss import FACTOR, NEW_LOGP
from marl.data import MultiAgentBatch, SampleBatch
from marl.data import sample_batch as sb
from marl.data.records import BATCH, RESULTS, SKIP, LearnResults, SampledBatch
from marl.execution import metrics as m
from marl.workflow import Operator, register_operator


@dataclass(slots=True)
class TurnBatch(SampledBatch):
    """A train batch on its way through the turns (kind `batch`)."""

    order: list[str] = field(default_factory=list)  # the trained policies in this iteration's update order
    step_of: dict[str, np.ndarray] = field(default_factory=dict)  # policy -> each row's env step (index into log_factor)
    log_factor: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per env step: sum of the updated agents' log-ratios
    results: LearnResults | None = None  # the learner results of the turns taken so far
    turns_taken: int = 0

    def copy(self) -> "TurnBatch":
        base = SampledBatch.copy(self)
        return TurnBatch(base.batch, base.episodes, base.weights_versions, base.runners, base.connector_deltas,
                         base.replay_indexes, list(self.order), {p: s.copy() for p, s in self.step_of.items()},
                         self.log_factor.copy(), None if self.results is None else self.results.copy(), self.turns_taken)


def env_steps_of(batches: dict[str, SampleBatch]) -> tuple[dict[str, np.ndarray], int]:
    """Each policy's rows' env step as an index into one table of the batch's env steps (episode id, step index),
    and the number of env steps."""
    pids = list(batches)
    keys = np.concatenate([np.stack([batches[p][sb.EPS_ID].astype(np.int64), batches[p][sb.T].astype(np.int64)], 1)
                           for p in pids])
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    bounds = np.cumsum([0] + [len(batches[p]) for p in pids])
    return {p: inverse[bounds[i]:bounds[i + 1]] for i, p in enumerate(pids)}, len(unique)


@register_operator
class AgentOrder(Operator):
    """This iteration's update order of the trained policies: a random permutation (HAPPO's), or with
    `shuffle: false` the declared order."""

    op_name, consumes, produces = "agent_order", (BATCH,), BATCH

    def __init__(self, shuffle: bool = True):
        if not isinstance(shuffle, bool):
            raise ValueError(f"agent_order.shuffle must be true or false, got {shuffle!r}")
        self.shuffle = shuffle
        self._rng: np.random.Generator | None = None

    def get_state(self) -> dict:
        return {"rng": self._rng.bit_generator.state}

    def set_state(self, state: dict) -> None:
        self._rng.bit_generator.state = state["rng"]

    def build(self, ctx, inputs):
        (upstream,) = inputs
        seed = ctx.config.debugging_cfg.seed
        self._rng = np.random.default_rng(None if seed is None else int(seed) + 7)
        trained = ctx.config.trained_policy_ids(list(ctx.policy_specs))

        def order(record: SampledBatch) -> TurnBatch:
            batches = {p: b for p, b in record.batch.policy_batches.items() if p in trained and len(b)}
            pids = [p for p in trained if p in batches]
            if self.shuffle:
                pids = [pids[i] for i in self._rng.permutation(len(pids))]
            step_of, steps = env_steps_of(batches) if batches else ({}, 0)
            return TurnBatch(MultiAgentBatch(batches, record.batch.env_steps), record.episodes, record.weights_versions,
                             record.runners, record.connector_deltas, {}, pids, step_of, np.zeros(steps))

        return upstream.for_each(order)


@register_operator
class LearnInTurn(Operator):
    """One agent's turn: a learner update of the `turn`-th policy of the order (0-based) on its rows, their
    advantages weighted by the factor at their env steps; then its new/old ratios enter the factors."""

    op_name, consumes, produces = "learn_in_turn", (BATCH,), BATCH

    def __init__(self, turn: int = 0):
        if not isinstance(turn, int) or turn < 0:
            raise ValueError(f"learn_in_turn.turn must be an int >= 0, got {turn!r}")
        self.turn = turn

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics
        timer = metrics.timers["learn"]

        def learn(record):
            if not isinstance(record, TurnBatch):
                raise TypeError(f"learn_in_turn(turn={self.turn}) takes the batches of an agent_order node, got a "
                                f"{type(record).__name__}")
            if record.turns_taken != self.turn:
                raise ValueError(f"learn_in_turn(turn={self.turn}) came after {record.turns_taken} turns; the turns "
                                 "of a graph are 0, 1, 2, ... in a chain")
            record.turns_taken += 1
            if self.turn >= len(record.order):  # fewer policies with rows in this batch than turns in the graph
                return record
            pid = record.order[self.turn]
            rows, steps = record.batch.policy_batches[pid], record.step_of[pid]
            factor = np.exp(record.log_factor[steps]).astype(np.float32)
            batch = MultiAgentBatch({pid: SampleBatch({**rows.columns, FACTOR: factor}, rows.tables)},
                                    record.batch.env_steps)
            lags = [ctx.learners.version - v for v in record.weights_versions]
            deltas = record.connector_deltas if self.turn == 0 else ()  # the runners' filter statistics: merged once
            with timer.timing():
                env_steps = metrics.counters[m.ENV_STEPS_SAMPLED]
                update = ctx.learners.update(batch, deltas, int(env_steps))
            if not update:
                return record
            new_logp = update[pid].pop(NEW_LOGP)
            np.add.at(record.log_factor, steps, new_logp - rows[sb.ACTION_LOGP])
            update[pid].update(factor_mean=float(factor.mean()), factor_max=float(factor.max()), turn=float(self.turn))
            results = LearnResults.from_update(update, record, lags)
            if record.results is None:
                record.results = results
            else:
                record.results.stats.update(results.stats)
                record.results.per_row.update(results.per_row)
            trained = int(update[pid].get("agent_steps_trained", 0))
            metrics.counters[f"{m.AGENT_STEPS_TRAINED}/{pid}"] += trained
            metrics.counters[m.AGENT_STEPS_TRAINED] += trained
            metrics.counters[m.LEARNER_UPDATES] += 1
            return record

        return upstream.for_each(learn)


@register_operator
class TurnsDone(Operator):
    """The turns' learner results as one record (kind `results`); SKIP when no policy had rows to train."""

    op_name, consumes, produces, may_skip = "turns_done", (BATCH,), RESULTS, True

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics = ctx.metrics

        def done(record):
            if not isinstance(record, TurnBatch) or record.turns_taken < len(record.order):
                taken = getattr(record, "turns_taken", 0)
                raise ValueError(f"turns_done: {len(getattr(record, 'order', []))} policies to update, but the graph "
                                 f"took {taken} turns; give it one learn_in_turn node per trained policy")
            if record.results is None:
                return SKIP
            metrics.counters[m.ENV_STEPS_TRAINED] += record.batch.env_steps
            return record.results

        return upstream.for_each(done)
