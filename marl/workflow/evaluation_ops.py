"""evaluate: the graph's second sampler, feeding the report node its `evaluation/...` results.

    evaluate(interval, parallel) --evaluation--> report

Every `interval`-th iteration it plays episodes with the current weights on
the evaluation runners (`ctx.evaluation`: runners of their own, built on
first use, see `marl.runtime.evaluation`); the other iterations it emits
SKIP. The report pulls it when an iteration starts and reads the
`EvaluationRun` when the iteration's training is done: with parallel=true
the episodes start at the pull, so they play the previous iteration's
weights while this one trains (remote evaluation runners); otherwise they
start at the read, with the weights this iteration trained.
"""

from __future__ import annotations

from marl.data.records import EVALUATION, SKIP, EvaluationRun
from marl.execution import LocalIterator
from marl.execution import metrics as m
from marl.workflow.protocol import Operator


class Evaluate(Operator):
    op_name, consumes, produces, may_skip = "evaluate", (), EVALUATION, True

    def __init__(self, interval: int = 1, parallel: bool = False):
        if int(interval) < 1:
            raise ValueError(f"evaluate.interval must be >= 1, got {interval}")
        self.interval, self.parallel = int(interval), bool(parallel)
        self._state = {"iterations": 0}

    def get_state(self) -> dict:  # iterations seen: a restored run evaluates on the same iterations
        return dict(self._state)

    def set_state(self, state: dict) -> None:
        self._state.update(iterations=int(state["iterations"]))

    def build(self, ctx, inputs):
        if ctx.evaluation is None:
            raise ValueError("evaluate needs evaluation runners, and this run has none (ExecutionContext.evaluation)")
        evaluation, learners, counters = ctx.evaluation, ctx.learners, ctx.metrics.counters
        state = self._state = {"iterations": 0}

        def start():
            evaluator = evaluation.evaluator()
            # exploration_step: sampled evaluation explores where training's schedules are (DQN's epsilon)
            evaluator.start(learners.get_weights(), exploration_step=counters[m.ENV_STEPS_SAMPLED])
            return evaluator

        def gen():
            while True:
                state["iterations"] += 1
                if state["iterations"] % self.interval:
                    yield SKIP
                elif self.parallel:
                    yield EvaluationRun(start().collect)
                else:
                    yield EvaluationRun(lambda: start().collect())

        return LocalIterator(gen, ctx.metrics, "evaluate")
