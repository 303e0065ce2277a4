"""The graph shapes several algorithms share, built once.

    synchronous_workflow (PPO, MAPPO, A2C, PG):
    sample(sync | overlap) --batch--> concat(train_batch_size) --batch--> learn
        [--results--> snapshot_opponents(every)]        (self-play runs: the pool's new snapshot ships with the sync)
        --results--> sync_weights(all) --results--> report(min_env_steps)
"""

from __future__ import annotations

from marl.workflow.graph import Workflow
from marl.workflow.operators import ConcatBatches, Learn, Report, Sample, SyncWeights
from marl.workflow.league_ops import LeagueMatches, LeagueSnapshot, Matchmaking
from marl.workflow.self_play_ops import SnapshotOpponents


def sample_node(config) -> Sample:
    """The sample node of a synchronous graph: mode=overlap when `env_runners.overlap` (the next round is
    sampled on the runner actors while the learner trains on this one), else mode=sync."""
    return Sample(mode="overlap" if config.env_runners_cfg.overlap else "sync")


def synchronous_workflow(config, name: str, report_min_env_steps: int = 0) -> Workflow:
    """Fresh samples of `training.train_batch_size` agent steps, one learner update each.

    `report_min_env_steps`: env steps one `train()` iteration samples at least (an algorithm
    whose updates are small reports over many of them).
    """
    wf = (
        Workflow(name)
        .add("sample", sample_node(config))
        .add("concat", ConcatBatches(min_agent_steps=config.training_cfg.train_batch_size), after="sample")
        .add("learn", Learn(), after="concat")
    )
    last = "learn"
    sp = config.self_play()
    if sp is not None:
        wf.add("snapshot_opponents", SnapshotOpponents(every=sp.snapshot_every), after="learn")
        last = "snapshot_opponents"
    if config.league() is not None:  # matchmaking -> sample -> learn -> rate the matches -> snapshot
        wf.add("league_matches", LeagueMatches(), after=last)
        wf.add("league_snapshot", LeagueSnapshot(), after="league_matches")
        wf.add("matchmaking", Matchmaking(), after="league_snapshot")
        last = "matchmaking"
    wf.add("sync_weights", SyncWeights(scope="all"), after=last)
    return wf.add("report", Report(min_env_steps=report_min_env_steps), after="sync_weights")
