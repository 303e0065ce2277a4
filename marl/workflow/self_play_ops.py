"""snapshot_opponents: self-play's pool upkeep, placed after `learn`.

Every `every` learner updates it copies the trained policy's weights into the
next slot of the opponent pool (round robin over `<policy>@0..k-1`; see
`marl.policies.self_play`), so the following `sync_weights` ships the new
snapshot to the runners. It also scores the games the trained policy played
against the pool: `self_play/win_rate`, `draw_rate`, `games` and an Elo-like
`self_play/elo` go into the iteration's result.
"""

from __future__ import annotations

from marl.data.records import RESULTS, SKIP
from marl.workflow.protocol import Operator
from marl.policies.self_play import EloTracker


class SnapshotOpponents(Operator):
    op_name, consumes, produces, handles_skip = "snapshot_opponents", (RESULTS,), RESULTS, True

    def __init__(self, every: int = 5):
        if int(every) < 1:
            raise ValueError(f"snapshot_opponents.every must be >= 1, got {every}")
        self.every = int(every)
        self._counts = {"updates": 0, "snapshots": 0}
        self._elo = None

    def get_state(self) -> dict:  # a restored run goes on with the next slot and its ratings
        return {"updates": self._counts["updates"], "snapshots": self._counts["snapshots"],
                "rating": self._elo.rating, "pool": dict(self._elo.pool)}

    def set_state(self, state: dict) -> None:
        self._counts.update(updates=int(state["updates"]), snapshots=int(state["snapshots"]))
        self._elo.rating, self._elo.pool = float(state["rating"]), dict(state["pool"])

    def build(self, ctx, inputs):
        (upstream,) = inputs
        sp = ctx.config.self_play()
        if sp is None:
            raise ValueError("snapshot_opponents needs multi_agent.self_play (the trained policy and its pool) in the config")
        metrics, learners = ctx.metrics, ctx.learners
        elo = self._elo = EloTracker(sp)
        state = self._counts = {"updates": 0, "snapshots": 0}
        scores: dict = {}  # episode id -> score, for this iteration's finished episodes (each scored once)

        def iteration_scores() -> dict:
            # metrics.episodes holds this iteration's finished episodes until the report drains them.
            current = {}
            for e in metrics.episodes:
                eid = e["episode_id"]
                current[eid] = scores[eid] if eid in scores else elo.record(e)
            scores.clear()
            scores.update(current)
            decided = [s for s in current.values() if s is not None]
            games, wins, draws = len(decided), sum(s == 1.0 for s in decided), sum(s == 0.5 for s in decided)
            return {
                "self_play/games": games, "self_play/wins": wins, "self_play/draws": draws,
                "self_play/win_rate": wins / games if games else float("nan"),
                "self_play/draw_rate": draws / games if games else float("nan"),
            }

        def snapshot(results):
            tally = iteration_scores()
            if results is SKIP:
                return results
            state["updates"] += 1
            if state["updates"] % self.every == 0:
                slot = sp.opponent_ids[state["snapshots"] % sp.pool_size]
                weights = learners.get_weights()
                weights["modules"][slot] = weights["modules"][sp.policy]
                weights["version"] += 1  # new weights for the runners: the next sync sends them
                learners.set_weights(weights)
                elo.snapshot(slot)
                state["snapshots"] += 1
            results.extra.update(tally, **{"self_play/elo": elo.rating, "self_play/snapshots": state["snapshots"]})
            return results

        return upstream.for_each(snapshot)
