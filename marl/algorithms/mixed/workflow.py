"""A MIXED run's graph: one sample node fans out to one branch per algorithm family.

    sample --batch--> concat(train_batch_size) --> learn(policies=[on-policy ...]) ---------------.
       `---batch--> store_to_replay(policies=[p]) ----------------------------------------------. |
    replay(policies=[p]) --> learn(policies=[p]) --> update_priorities --> update_target(p) ---. | |
                                                                                               v v v
                              concurrently(weights=[k, ..., 1, k*u, ...], emit=[learning branches])
                                  --> sync_weights(all) --> report

(one store/replay/learn chain per replay-trained policy). One cycle of the
join pulls k sampling rounds through every store node, which is exactly the k
rounds the concat node needs for one on-policy batch, so every sampled round
reaches every branch once and no branch falls behind; each replay policy
learns k*u times per cycle, u following its `training_intensity`. One
`sync_weights` after the join serves every branch: the on-policy policies
sample with their newest weights from the first round of the next batch.
"""

from __future__ import annotations

import math

from marl.workflow import (
    Concurrently,
    ConcatBatches,
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


def _round_env_steps(config) -> int:
    r = config.env_runners_cfg
    return max(1, r.num_env_runners) * r.num_envs_per_env_runner * r.rollout_fragment_length


def mixed_workflow(config) -> Workflow:
    families = config._families()
    on_policy, replay = families["on_policy"], families["replay"]
    round_steps = _round_env_steps(config)
    wf = Workflow("mixed").add("sample", Sample(mode="sync"))
    branches, weights, emit = [], [], []
    rounds = 1
    if on_policy:
        batch_size = config.plan_for(on_policy[0]).training.train_batch_size
        rounds = math.ceil(batch_size / round_steps)  # concat consumes exactly this many rounds per batch
    for pid in replay:
        plan = config.plan_for(pid)
        t = plan.training
        wf.add(f"store_{pid}", StoreToReplay(n_step=t.n_step, gamma=t.gamma, policies=[pid]), after="sample")
        branches.append(f"store_{pid}")
        weights.append(rounds)
    if on_policy:
        wf.add("concat", ConcatBatches(min_env_steps=batch_size), after="sample")
        wf.add("learn_on_policy", Learn(policies=on_policy), after="concat")
        emit.append(len(branches))
        branches.append("learn_on_policy")
        weights.append(1)
    for pid in replay:
        plan = config.plan_for(pid)
        t = plan.training
        if t.training_intensity is None:
            updates = rounds  # one update per sampling round, as in the DQN graph
        else:
            updates = max(1, round(rounds * t.training_intensity * round_steps / t.train_batch_size))
        wf.add(f"replay_{pid}", Replay(batch_size=t.train_batch_size, learning_starts=t.num_steps_sampled_before_learning_starts, policies=[pid]))
        wf.add(f"learn_{pid}", Learn(policies=[pid]), after=f"replay_{pid}")
        wf.add(f"update_priorities_{pid}", UpdatePriorities(), after=f"learn_{pid}")
        every, tau = plan.target_update(updates / rounds)
        wf.add(
            f"update_target_{pid}",
            UpdateTarget(every_env_steps=every, tau=tau, policies=[pid]),
            after=f"update_priorities_{pid}",
        )
        emit.append(len(branches))
        branches.append(f"update_target_{pid}")
        weights.append(updates)
    if not emit:
        raise ValueError("a MIXED run needs at least one trained policy")
    wf.add("join", Concurrently(weights=weights, emit=emit), after=branches)
    wf.add("sync_weights", SyncWeights(scope="all"), after="join")
    wf.add("report", Report(min_env_steps=config.training_cfg.min_env_steps_per_iteration), after="sync_weights")
    return wf
