"""DQN's iteration as a graph: two branches joined round-robin.

    sample(sync | overlap) --batch--> store_to_replay ---------------------------------------------.
                                                                                          v
    replay --batch--> learn --> update_priorities --> update_target --> sync_weights --> concurrently --> report

`concurrently` pulls `a` items from the storing branch, then `b` from the
learning branch; a:b follows `training_intensity` (replayed transitions per
sampled env step), so the ratio holds however big a sampling round is. With `env_runners.overlap` the
sample node runs mode=overlap: the runner actors sample the next round while the
learning branch makes its updates (the actions of a round lag the newest Q-values
by one round, which off-policy learning from replay does not mind).
"""

from __future__ import annotations

from marl.workflow import (
    Concurrently,
    Learn,
    Replay,
    Report,
    StoreToReplay,
    SyncWeights,
    UpdatePriorities,
    UpdateTarget,
    Workflow,
)
from marl.workflow.graphs import sample_node
from marl.modules.recurrent import recurrent_options


def round_robin_weights(config) -> list[int]:
    """[sampling rounds, learner updates] per cycle of the join."""
    t, r = config.training_cfg, config.env_runners_cfg
    if t.training_intensity is None:
        return [1, 1]
    env_steps_per_round = max(1, r.num_env_runners) * r.num_envs_per_env_runner * r.rollout_fragment_length
    updates_per_round = t.training_intensity * env_steps_per_round / (t.train_batch_size * _steps_per_replayed_row(config))
    if updates_per_round >= 1:
        return [1, max(1, round(updates_per_round))]
    return [max(1, round(1 / updates_per_round)), 1]


def _steps_per_replayed_row(config) -> int:
    """Transitions in one replayed row: 1, or `max_seq_len` for a recurrent Q network's sequence rows (so
    `training_intensity` counts transitions either way)."""

    longest = 1
    for pid in config.policy_specs():
        kind, _, max_seq_len = recurrent_options(config.plan_for(pid).model)
        if kind is not None:
            longest = max(longest, max_seq_len)
    return longest


def dqn_workflow(config, name: str = "dqn", joint: bool = False) -> Workflow:
    """`joint`: store one transition per group and env step (VDN/QMIX), not one per agent."""
    t = config.training_cfg
    rounds, updates = round_robin_weights(config)
    return (
        Workflow(name)
        .add("sample", sample_node(config))
        .add("store", StoreToReplay(n_step=t.n_step, gamma=t.gamma, joint=joint), after="sample")
        .add("replay", Replay(batch_size=t.train_batch_size, learning_starts=t.num_steps_sampled_before_learning_starts))
        .add("learn", Learn(), after="replay")
        .add("update_priorities", UpdatePriorities(), after="learn")
        .add("update_target", UpdateTarget(every_env_steps=t.target_network_update_freq, tau=t.tau), after="update_priorities")
        .add("sync_weights", SyncWeights(scope="all", every=updates), after="update_target")
        .add("join", Concurrently(weights=[rounds, updates]), after=["store", "sync_weights"])
        .add("report", Report(min_env_steps=t.min_env_steps_per_iteration), after="join")
    )
