"""IMPALA's iteration as a graph: actors sample asynchronously, the learner consumes, weights flow back.

    sample(async, in flight per runner, lag bound) --batch--> concat(train_batch_size) --batch--> learn
        [--results--> update_target(every N env steps)]   (APPO: the target policy its trust region is centred on)
        --results--> sync_weights(scope=source, every=broadcast_interval) --results--> report

Runners keep sampling while the learner trains (their requests are queued);
each batch records the weights version it was produced with, and the
learner-side lag is reported as `perf/policy_lag_mean` / `perf/policy_lag_max`.
"""

from __future__ import annotations

from marl.workflow import ConcatBatches, Learn, Report, Sample, SyncWeights, UpdateTarget, Workflow


def async_actor_learner_workflow(config, name: str, target_update_every: int | None = None) -> Workflow:
    t = config.training_cfg
    workflow = (
        Workflow(name)
        .add(
            "sample",
            Sample(
                mode="async", num_async=t.max_requests_in_flight_per_env_runner, max_policy_lag=config.policy_lag_bound()
            ),
        )
        .add("concat", ConcatBatches(min_agent_steps=t.train_batch_size), after="sample")
        .add("learn", Learn(), after="concat")
    )
    learned = "learn"
    if target_update_every is not None:
        workflow.add("update_target", UpdateTarget(every_env_steps=target_update_every), after="learn")
        learned = "update_target"
    return (
        workflow.add("sync_weights", SyncWeights(scope="source", every=t.broadcast_interval), after=learned)
        .add("report", Report(min_env_steps=t.min_env_steps_per_iteration), after="sync_weights")
    )
