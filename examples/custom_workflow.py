"""Writing a custom workflow: a new operator, and PPO's graph rebuilt around it.

    python examples/custom_workflow.py

`ClipRewards` is a batch -> batch operator placed between concat and learn.
Registered, it can also be named in a scenario's `workflow:` section
(`clip: {op: clip_rewards, limit: 1.0, after: concat}`).
"""

from __future__ import annotations

import numpy as np

from marl import PPOConfig
from marl.data import sample_batch as sb
from marl.workflow import ConcatBatches, Learn, Operator, Report, Sample, SyncWeights, Workflow, register_operator
from marl.workflow.draw import draw_workflow
from marl.data.records import BATCH


@register_operator
class ClipRewards(Operator):
    """Clips every policy's rewards to [-limit, limit] before the learner sees them."""

    op_name, consumes, produces = "clip_rewards", (BATCH,), BATCH

    def __init__(self, limit: float = 1.0):
        self.limit = float(limit)

    def build(self, ctx, inputs):
        (upstream,) = inputs  # a LocalIterator of SampledBatch records (marl.data.records)

        def clip(record):  # its own copy if the node it comes after fans out: mutate freely
            for policy_batch in record.batch.policy_batches.values():
                policy_batch[sb.REWARDS] = np.clip(policy_batch[sb.REWARDS], -self.limit, self.limit)
            return record

        return upstream.for_each(clip)


def clipped_ppo(train_batch_size: int) -> Workflow:
    return (
        Workflow("ppo_clipped")
        .add("sample", Sample(mode="sync"))
        .add("concat", ConcatBatches(min_env_steps=train_batch_size), after="sample")
        .add("clip", ClipRewards(limit=0.5), after="concat")
        .add("learn", Learn(), after="clip")
        .add("sync_weights", SyncWeights(scope="all"), after="learn")
        .add("report", Report(), after="sync_weights")
    )


def main(iterations: int = 3, picture: str | None = None) -> list[dict]:
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=64)
        .training(train_batch_size=256, num_epochs=2)
        .debugging(seed=0)
    )
    config.with_workflow(clipped_ppo(config.training_cfg.train_batch_size))
    algo = config.build()
    print(algo.workflow.describe())
    if picture:
        draw_workflow(algo.workflow, picture)
    results = [algo.train() for _ in range(iterations)]
    for r in results:
        print(f"iter {r['iteration']}  return {r['episode_return_mean']:.1f}  env_steps {r['env_steps_total']}")
    algo.stop()
    return results


if __name__ == "__main__":
    main()
