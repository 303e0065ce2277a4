"""PPO's iteration as a graph: synchronous sampling into minibatch SGD.

    sample(sync) --batch--> concat(train_batch_size) --batch--> learn
        --results--> sync_weights(all) --results--> report
"""

from marl.workflow import ConcatBatches, Learn, Report, Sample, SyncWeights, Workflow


def ppo_workflow(config) -> Workflow:
    return (
        Workflow("ppo")
        .add("sample", Sample(mode="sync"))
        .add("concat", ConcatBatches(min_env_steps=config.training_cfg.train_batch_size), after="sample")
        .add("learn", Learn(), after="concat")
        .add("sync_weights", SyncWeights(scope="all"), after="learn")
        .add("report", Report(), after="sync_weights")
    )
