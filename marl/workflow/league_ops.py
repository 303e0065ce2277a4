"""The league's workflow nodes (`multi_agent.league`, see `marl.policies.league`), placed after `learn`:

    learn -> league_matches -> league_snapshot -> matchmaking -> sync_weights -> report

- `league_matches` scores the iteration's finished episodes between two members: each moves both
  members' Elo and openskill ratings (`marl.policies.ratings.Ratings`) and the trained members'
  tallies; it logs `league/win_rate/<role>` and `league/games`.
- `league_snapshot` copies a trained member's weights into the next snapshot slot when its mean
  score since its last snapshot (against the league, or with `snapshot_against: previous` a main
  agent's against its latest snapshot) passes `snapshot_win_rate` (over at least `min_games` games) or
  after `snapshot_every` learner updates; the snapshot starts from its member's ratings. It logs
  `league/size`, `league/snapshots` and `league/rating/<member>` (openskill ordinal), `league/elo/<member>`.
  With `rating_games: N` it then plays N sampled games between the new snapshot and its member's previous
  one (`RatingMatches`) and rates them: frozen snapshots otherwise meet only moving trained members.
- `matchmaking` turns the win rates into each learner's opponent distribution (PFSP) and sends it
  to the runners, whose `LeagueMapping` draws the next episodes' pairs from it.

The three share one `LeagueBook`, checkpointed as `league` beside the learner (whose frozen slots
hold the snapshots' weights), so a restored run goes on with the same league, ratings and matchmaking.
"""

from __future__ import annotations

from marl.data.records import RESULTS, SKIP
from marl.policies.league import League, pfsp_probabilities
from marl.policies.ratings import Ratings
from marl.runners.matches import play_matches
from marl.workflow.protocol import Operator


class LeagueBook:
    """Who sits in each snapshot slot, the ratings, the trained members' tallies and the matchmaking table."""

    def __init__(self, league: League, runners=None):
        self.league, self.runners = league, runners
        self.ratings = Ratings(elo_k=league.elo_k)
        for member in league.trained_ids + league.random_ids:
            self.ratings.add(member)
        self.slots = [""] * league.max_snapshots  # slot k -> the rated name of the snapshot in it ("" empty)
        self.next_slot, self.snapshots = 0, 0
        self.versions = {m: 0 for m in league.trained_ids}  # snapshots taken of each member
        self.since = {m: [0, 0, 0.0] for m in league.trained_ids}  # updates, games, score since its last snapshot
        self.table: dict = {}

    def rated(self, pid: str) -> str | None:
        """The ratings' name of the member a policy id plays as (None: not a league member, or an empty slot)."""
        if pid in self.since or pid in self.league.random_ids:
            return pid
        if pid in self.league.snapshot_ids:
            return self.slots[self.league.snapshot_ids.index(pid)] or None
        return None

    def counts_for_snapshot(self, member: str, opponent: str) -> bool:
        """Whether a trained member's game against `opponent` counts towards its snapshot rule (snapshot_against)."""
        if self.league.snapshot_against == "league" or self.league.roles()[member] != "main_agent":
            return True
        return self.versions[member] > 0 and opponent == f"{member}.v{self.versions[member] - 1}"

    def filled(self) -> list[str]:
        return [sid for sid, name in zip(self.league.snapshot_ids, self.slots) if name]

    def push(self) -> None:
        if self.runners is not None and self.table:
            self.runners.set_mapping_state(self.table)

    def get_state(self) -> dict:
        return {"ratings": self.ratings.get_state(), "slots": list(self.slots), "next_slot": self.next_slot,
                "snapshots": self.snapshots, "versions": dict(self.versions),
                "since": {m: list(v) for m, v in self.since.items()}, "table": self.table}

    def set_state(self, state: dict) -> None:
        self.ratings.set_state(state["ratings"])
        self.slots, self.next_slot, self.snapshots = list(state["slots"]), int(state["next_slot"]), int(state["snapshots"])
        self.versions = {m: int(v) for m, v in state["versions"].items()}
        self.since = {m: [int(v[0]), int(v[1]), float(v[2])] for m, v in state["since"].items()}
        self.table = state["table"]
        self.push()  # the runners draw from the restored table, not the fresh one


def league_book(ctx) -> LeagueBook:
    """The run's one book, made by whichever league node is built first."""
    book = ctx.checkpointables.get("league")
    if book is None:
        league = ctx.config.league()
        if league is None:
            raise ValueError("the league nodes need multi_agent.league (its members and rules) in the config")
        book = ctx.checkpointables["league"] = LeagueBook(league, ctx.runners)
    return book


class RatingMatches:
    """Games between a member's newest snapshot and the one before it, recorded in the ratings (`rating_games`).

    Half the games seat the new snapshot first, half second; sampled actions, seeded by the run's seed and
    the league's snapshot count, so a restored run plays the same games.
    """

    def __init__(self, config, book: LeagueBook, policy_specs: dict):
        self.config, self.book, self.policy_specs = config, book, policy_specs
        self.seed = int(config.debugging_cfg.seed or 0)

    def play(self, member: str, weights: dict) -> None:
        """Rates `member`'s newest snapshot against its previous one (weights: the learner's, slots included)."""
        book, games = self.book, self.book.league.rating_games
        version = book.versions[member] - 1
        new, previous = f"{member}.v{version}", f"{member}.v{version - 1}"
        if games == 0 or version == 0 or previous not in book.slots:  # the first, or its predecessor overwritten
            return
        slot = book.league.snapshot_ids
        members = {name: weights["modules"][slot[book.slots.index(name)]] for name in (new, previous)}
        spec = self.policy_specs[book.league.policy]  # the members' spaces: the run's, resolved by Algorithm
        seed = self.seed * 1_000_003 + book.snapshots
        first = games // 2
        for (a, b), n, s in (((new, previous), first, seed), ((previous, new), games - first, seed + 1)):
            if n == 0:
                continue
            for ra, rb in play_matches(self.config, spec, (members[a], members[b]), n, s):
                book.ratings.record(a, b, 1.0 if ra > rb else 0.5 if ra == rb else 0.0)


class LeagueMatches(Operator):
    op_name, consumes, produces, handles_skip = "league_matches", (RESULTS,), RESULTS, True

    def build(self, ctx, inputs):
        (upstream,) = inputs
        book, metrics = league_book(ctx), ctx.metrics
        roles = book.league.roles()
        seen: set = set()  # this iteration's episodes already scored (the report drains metrics.episodes)

        def score_matches(results):
            current = {e["episode_id"] for e in metrics.episodes}
            seen.intersection_update(current)
            tally = {role: [0, 0.0] for role in set(roles.values())}
            for e in metrics.episodes:
                if e["episode_id"] in seen:
                    continue
                seen.add(e["episode_id"])
                pair = [(pid, r) for pid, r in e["policy_returns"].items()]
                if len(pair) != 2:  # self-play of one policy in both seats: no match between two members
                    continue
                (pa, ra), (pb, rb) = pair
                a, b = book.rated(pa), book.rated(pb)
                if a is None or b is None:
                    continue
                score = 1.0 if ra > rb else 0.5 if ra == rb else 0.0
                book.ratings.record(a, b, score)
                against_random = any(m in book.league.random_ids for m in (a, b))
                for member, other, s in ((a, b, score), (b, a, 1.0 - score)):
                    if member not in book.since or against_random:
                        continue
                    tally[roles[member]][0] += 1
                    tally[roles[member]][1] += s
                    if book.counts_for_snapshot(member, other):
                        book.since[member][1] += 1
                        book.since[member][2] += s
            if results is SKIP:
                return results
            results.extra["league/games"] = sum(t[0] for t in tally.values())
            for role, (games, total) in tally.items():
                results.extra[f"league/win_rate/{role}"] = total / games if games else float("nan")
            return results

        return upstream.for_each(score_matches)


class LeagueSnapshot(Operator):
    op_name, consumes, produces, handles_skip = "league_snapshot", (RESULTS,), RESULTS, True

    def build(self, ctx, inputs):
        (upstream,) = inputs
        book, learners = league_book(ctx), ctx.learners
        league, rating = book.league, RatingMatches(ctx.config, book, ctx.policy_specs)

        def take(member: str, weights: dict) -> None:
            slot = book.next_slot % league.max_snapshots
            weights["modules"][league.snapshot_ids[slot]] = weights["modules"][member]
            name = f"{member}.v{book.versions[member]}"
            book.versions[member] += 1
            book.ratings.add(name, like=member)
            book.slots[slot] = name
            book.next_slot, book.snapshots = book.next_slot + 1, book.snapshots + 1
            book.since[member] = [0, 0, 0.0]

        if book.snapshots == 0:  # the league starts with the main agent's initial weights
            weights = learners.get_weights()
            take(league.policy, weights)
            weights["version"] += 1
            learners.set_weights(weights)

        def snapshot(results):
            if results is SKIP:
                return results
            weights = None
            for member, since in book.since.items():
                since[0] += 1
                won = since[1] >= league.min_games and since[2] / since[1] >= league.snapshot_win_rate
                if won or since[0] >= league.snapshot_every:
                    weights = weights or learners.get_weights()
                    take(member, weights)
                    rating.play(member, weights)
            if weights is not None:
                weights["version"] += 1  # new weights for the runners: the next sync sends them
                learners.set_weights(weights)
            results.extra.update(book.ratings.metrics(), **{"league/size": len(book.filled()), "league/snapshots": book.snapshots})
            return results

        return upstream.for_each(snapshot)


class Matchmaking(Operator):
    op_name, consumes, produces, handles_skip = "matchmaking", (RESULTS,), RESULTS, True

    def build(self, ctx, inputs):
        (upstream,) = inputs
        book = league_book(ctx)
        league = book.league

        def table() -> dict:
            snapshots = book.filled()
            opponents = {}
            for member, role in league.roles().items():
                mains = [[m, 1.0 / len(league.main_ids)] for m in league.main_ids]
                if role == "main_exploiter" or not snapshots:
                    opponents[member] = mains
                    continue
                win_rates = [_mean_score(book.ratings, member, book.rated(s)) for s in snapshots]
                pfsp = pfsp_probabilities(win_rates, league.pfsp)
                share = league.self_play if role == "main_agent" else 0.0
                weak = league.random_share if role == "main_agent" else 0.0
                opponents[member] = [[m, p * share] for m, p in mains if share > 0] + [
                    [r, weak] for r in league.random_ids if weak > 0] + [
                    [s, float(p) * (1.0 - share - weak)] for s, p in zip(snapshots, pfsp)]
            return {"learners": league.learner_weights(), "opponents": opponents}

        def matchmake(results):
            if results is SKIP:
                return results
            book.table = table()
            book.push()
            return results

        return upstream.for_each(matchmake)


def _mean_score(ratings: Ratings, a: str, b: str) -> float:
    games = ratings.games(a, b)
    return ratings.counts[(a, b)][0] / games if games else float("nan")


__all__ = ["LeagueBook", "LeagueMatches", "LeagueSnapshot", "Matchmaking"]
