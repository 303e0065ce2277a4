"""snapshot_opponents: self-play's pool upkeep, placed after `learn`.

Every `every` learner updates it copies the trained policy's weights into the
next slot of the opponent pool (round robin over `<policy>@0..k-1`; see
`marl.policies.self_play`), so the following `sync_weights` ships the new
snapshot to the runners. It also scores the games the trained policy played
against the pool: `self_play/win_rate`, `draw_rate`, `games` and an Elo-like
`self_play/elo` go into the iteration's result.
"""

from __future__ import annotations

from marl.workflow.operators import RESULTS, Operator, register_operator


class SnapshotOpponents(Operator):
    op_name, consumes, produces = "snapshot_opponents", (RESULTS,), RESULTS

    def __init__(self, every: int = 5):
        if int(every) < 1:
            raise ValueError(f"snapshot_opponents.every must be >= 1, got {every}")
        self.every = int(every)

    def build(self, ctx, inputs):
        from marl.policies.self_play import EloTracker

        (upstream,) = inputs
        sp = ctx.config.self_play()
        if sp is None:
            raise ValueError("snapshot_opponents needs multi_agent.self_play (the trained policy and its pool) in the config")
        metrics, learners = ctx.metrics, ctx.learners
        elo = EloTracker(sp)
        state = {"updates": 0, "snapshots": 0, "seen": set()}
        self.checkpoint_state = _SelfPlayState(state, elo)  # a restored run goes on with the next slot and its ratings

        def score_new_games() -> None:
            # metrics.episodes holds this iteration's finished episodes until the report drains them.
            episodes = list(metrics.episodes)
            scores = [elo.record(e) for e in episodes if e["episode_id"] not in state["seen"]]
            state["seen"] = {e["episode_id"] for e in episodes}
            scores = [s for s in scores if s is not None]
            out = metrics.info.setdefault("results", {})
            games = out.get("self_play/games", 0) + len(scores)
            wins = out.get("self_play/wins", 0) + sum(s == 1.0 for s in scores)
            draws = out.get("self_play/draws", 0) + sum(s == 0.5 for s in scores)
            out.update({
                "self_play/games": games, "self_play/wins": wins, "self_play/draws": draws,
                "self_play/win_rate": wins / games if games else float("nan"),
                "self_play/draw_rate": draws / games if games else float("nan"),
                "self_play/elo": elo.rating, "self_play/snapshots": state["snapshots"],
            })

        def snapshot(results):
            score_new_games()
            if not results:
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
                metrics.info["results"]["self_play/snapshots"] = state["snapshots"]
            return results

        return upstream.for_each(snapshot)


class _SelfPlayState:
    """What checkpoints keep of the pool upkeep: update and snapshot counts, the Elo ratings."""

    def __init__(self, counts: dict, elo):
        self.counts, self.elo = counts, elo

    def get_state(self) -> dict:
        return {"updates": self.counts["updates"], "snapshots": self.counts["snapshots"],
                "rating": self.elo.rating, "pool": dict(self.elo.pool)}

    def set_state(self, state: dict) -> None:
        self.counts["updates"], self.counts["snapshots"] = int(state["updates"]), int(state["snapshots"])
        self.elo.rating, self.elo.pool = float(state["rating"]), dict(state["pool"])


register_operator(SnapshotOpponents)
