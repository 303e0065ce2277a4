"""SAC's iteration is DQN's graph (`marl.algorithms.dqn.workflow`): two branches joined round-robin.

    sample(sync) --batch--> store_to_replay[joint] -------------------------------------.
                                                                                         v
    replay --batch--> learn --> update_priorities --> update_target --> sync_weights --> concurrently --> report

`tau` is a Polyak weight per learner update; `update_target` runs once per
sampling round (after the round's first update), so the graph's weight is the
compound of a round's updates, 1 - (1 - tau)^updates.
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


def polyak_per_round(tau: float, updates: float) -> float:
    return 1.0 - (1.0 - tau) ** max(1, updates)


def sac_workflow(config, name: str = "sac", joint: bool = False) -> Workflow:
    """`joint`: store one transition per group and env step (MASAC/MADDPG), not one per agent."""
    t = config.training_cfg
    rounds, updates = round_robin_weights(config)
    tau = min(1.0, max(polyak_per_round(t.tau, updates), 1e-6))
    return (
        Workflow(name)
        .add("sample", Sample(mode="sync"))
        .add("store", StoreToReplay(n_step=t.n_step, gamma=t.gamma, joint=joint), after="sample")
        .add("replay", Replay(batch_size=t.train_batch_size, learning_starts=t.num_steps_sampled_before_learning_starts))
        .add("learn", Learn(), after="replay")
        .add("update_priorities", UpdatePriorities(), after="learn")
        .add("update_target", UpdateTarget(every_env_steps=1, tau=tau), after="update_priorities")
        .add("sync_weights", SyncWeights(scope="all", every=updates), after="update_target")
        .add("join", Concurrently(weights=[rounds, updates]), after=["store", "sync_weights"])
        .add("report", Report(min_env_steps=t.min_env_steps_per_iteration), after="join")
    )
