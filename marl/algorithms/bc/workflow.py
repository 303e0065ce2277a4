"""The offline graph BC, MARWIL and CQL share: recorded batches into the learner.

    read_offline(rows=train_batch_size, shuffle) --batch--> learn --results--> [update_target -->] report

With `evaluation.evaluation_interval` set, an `evaluate` node feeds the report too
(online episodes with the current weights, so users see real returns).
"""

from __future__ import annotations

from marl.workflow import Learn, Report, Workflow
from marl.workflow.offline_ops import ReadOffline
from marl.workflow.replay_ops import UpdateTarget


def offline_workflow(config, name: str, shuffle: str | None = None, target_every: int | None = None,
                     tau: float = 1.0) -> Workflow:
    """`target_every`: refresh target networks every this many env steps read (CQL), Polyak with `tau` < 1."""
    wf = (
        Workflow(name)
        .add("read_offline", ReadOffline(rows=config.training_cfg.train_batch_size, shuffle=shuffle))
        .add("learn", Learn(), after="read_offline")
    )
    last = "learn"
    if target_every is not None:
        wf.add("update_target", UpdateTarget(every_env_steps=target_every, tau=tau), after="learn")
        last = "update_target"
    return wf.add("report", Report(), after=last)
