"""PPO's iteration as a graph: synchronous sampling into minibatch SGD.

    sample(sync) --batch--> concat(train_batch_size) --batch--> learn
        --results--> sync_weights(all) --results--> report
"""

from marl.workflow import ConcatBatches, Learn, Report, Sample, SnapshotOpponents, SyncWeights, Workflow


def ppo_workflow(config) -> Workflow:
    wf = (
        Workflow("ppo")
        .add("sample", Sample(mode="sync"))
        .add("concat", ConcatBatches(min_env_steps=config.training_cfg.train_batch_size), after="sample")
        .add("learn", Learn(), after="concat")
    )
    last = "learn"
    sp = config.self_play()
    if sp is not None:  # learn --> snapshot_opponents(every) --> sync_weights: the pool's new snapshot ships with the sync
        wf.add("snapshot_opponents", SnapshotOpponents(every=sp.snapshot_every), after="learn")
        last = "snapshot_opponents"
    return wf.add("sync_weights", SyncWeights(scope="all"), after=last).add("report", Report(), after="sync_weights")
