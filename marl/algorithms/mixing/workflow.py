"""VDN/QMIX's iteration: DQN's two branches, storing joint (per group, per env step) transitions.

    sample --batch--> store_to_replay(joint) ------------------------------------------.
                                                                                        v
    replay --batch--> learn --> update_priorities --> update_target --> sync_weights --> concurrently --> report
"""

from __future__ import annotations

from marl.algorithms.dqn.workflow import round_robin_weights
from marl.workflow import (
    Concurrently,
    Learn,
    Replay,
    Report,
    Sample,
    StoreToReplay,
    SyncWeights,
    UpdatePriorities,
    UpdateTarget,
    Workflow,
)


def mixing_workflow(config, name: str) -> Workflow:
    t = config.training_cfg
    rounds, updates = round_robin_weights(config)
    return (
        Workflow(name)
        .add("sample", Sample(mode="sync"))
        .add("store", StoreToReplay(n_step=t.n_step, gamma=t.gamma, joint=True), after="sample")
        .add("replay", Replay(batch_size=t.train_batch_size, learning_starts=t.num_steps_sampled_before_learning_starts))
        .add("learn", Learn(), after="replay")
        .add("update_priorities", UpdatePriorities(), after="learn")
        .add("update_target", UpdateTarget(every_env_steps=t.target_network_update_freq, tau=t.tau), after="update_priorities")
        .add("sync_weights", SyncWeights(scope="all", every=updates), after="update_target")
        .add("join", Concurrently(weights=[rounds, updates]), after=["store", "sync_weights"])
        .add("report", Report(min_env_steps=t.min_env_steps_per_iteration), after="join")
    )
