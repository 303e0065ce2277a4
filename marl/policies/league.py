"""A league (AlphaStar, Vinyals et al. 2019): trained members in three roles plus frozen snapshots.

Declared as `multi_agent.league: {policy, main_agents, main_exploiters, league_exploiters, max_snapshots,
snapshot_win_rate, min_games, snapshot_every, snapshot_against, self_play, random_share, main_share, pfsp, elo_k,
rating_games, evaluation_opponent}`.

Every member copies the declared policy `policy` (module and model). The trained members are
`<policy>` (the first main agent), `<policy><i>` (more main agents), `main_exploiter<i>`
and `league_exploiter<i>`; the snapshots live in `max_snapshots` frozen slots `<policy>@k`,
filled one after the other (the oldest is overwritten once all are full). The league starts with
one snapshot, the main agent's initial weights.

Matchmaking (each episode: one learner, seated first or second at random, and one opponent; the
learner is a main agent with probability `main_share`, an exploiter otherwise, drawn uniformly
within the group; `main_share: null` draws uniformly among all trained members):

- main agent: with probability `self_play` the current main agents (self-play), with probability
  `random_share` the permanent member `random` (a uniformly random legal-move player, as RLlib's league
  example keeps: the main agent goes on meeting weak play and does not forget how to beat it),
  otherwise a snapshot drawn by prioritised fictitious self-play (PFSP);
- main exploiter: the current main agents;
- league exploiter: a snapshot drawn by PFSP.

PFSP draws snapshot j with probability proportional to f(p_j), p_j the learner's mean score
against j (0.5 before they met): `pfsp="squared"` f = (1 - p)^2 (hard opponents first),
`"variance"` f = p (1 - p) (opponents of similar strength), `"linear"` f = 1 - p, `"uniform"`.
A trained member is snapshotted when its mean score since its last snapshot reaches `snapshot_win_rate`
over at least `min_games` games, or after `snapshot_every` learner updates. The games counted:
`snapshot_against="league"` every game against another member but `random`; `"previous"` a main
agent's games against its own latest snapshot only (AlphaStar's "beats the last snapshot"), so each
snapshot beats the one before by that margin (exploiters, which do not meet their own snapshots,
count the league's games either way).

Ratings: every scored game moves both players' ratings. Snapshots are frozen but only ever meet trained
members, whose strength moves, so two snapshots of one member are ordered by indirect evidence alone;
`rating_games: N` (0: none) plays N sampled games, seats alternated, between each new snapshot of a
member and that member's snapshot before it, and rates them from those games too.

The draws are made on the runners by `LeagueMapping`, seeded by the episode id, from a table the
`matchmaking` workflow node computes on the driver and sends them after every update.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

import numpy as np

from marl.errors import unknown_key
from marl.policies.mapping import MappingError, PolicySpec
from marl.modules.random_policy import RandomPolicy
from marl.policies.self_play import SelfPlay, opponent_module_class, with_copies, with_fixed_opponent

PFSP_WEIGHTINGS = ("squared", "variance", "linear", "uniform")
SNAPSHOT_AGAINST = ("league", "previous")
ROLES = ("main_agent", "main_exploiter", "league_exploiter")


def pfsp_probabilities(win_rates, weighting: str = "squared") -> np.ndarray:
    """Probabilities of drawing each opponent from the learner's win rates against them (NaN: never met = 0.5)."""
    if weighting not in PFSP_WEIGHTINGS:
        raise MappingError(f"multi_agent.league.pfsp must be one of {list(PFSP_WEIGHTINGS)}, got {weighting!r}")
    p = np.nan_to_num(np.asarray(win_rates, dtype=float), nan=0.5)
    if p.size == 0:
        raise MappingError("PFSP needs at least one opponent; the league has no members to draw from")
    f = {"squared": (1 - p) ** 2, "variance": p * (1 - p), "linear": 1 - p, "uniform": np.ones_like(p)}[weighting]
    total = f.sum()
    return f / total if total > 0 else np.full(p.size, 1.0 / p.size)  # beats (or loses to) everyone: uniform


@dataclass
class League:
    policy: str = "main"
    main_agents: int = 1
    main_exploiters: int = 1
    league_exploiters: int = 1
    max_snapshots: int = 16
    snapshot_win_rate: float = 0.7
    min_games: int = 50
    snapshot_every: int = 20
    snapshot_against: str = "league"
    self_play: float = 0.35
    random_share: float = 0.0
    main_share: float | None = None
    pfsp: str = "squared"
    elo_k: float = 16.0
    rating_games: int = 0
    evaluation_opponent: str | type | None = None

    section = "league"  # where this lives under multi_agent (evaluation rebuilds it with another opponent)
    OPPONENT_ID = SelfPlay.OPPONENT_ID
    RANDOM_ID = "random"  # the permanent random member's policy id and rated name (with random_share > 0)

    @staticmethod
    def from_any(value) -> "League | None":
        if value is None or isinstance(value, League):
            return value
        allowed = sorted(League.__dataclass_fields__)
        if not isinstance(value, dict):
            raise MappingError(f"multi_agent.league must be a mapping with keys {allowed} or null, got {value!r}")
        for key in value:
            if key not in allowed:
                raise unknown_key(f"multi_agent.league.{key}", allowed, "league holds", MappingError)
        league = League(**value)
        for key, low in (("main_agents", 1), ("main_exploiters", 0), ("league_exploiters", 0), ("max_snapshots", 1),
                         ("min_games", 1), ("snapshot_every", 1), ("rating_games", 0)):
            v = getattr(league, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise MappingError(f"multi_agent.league.{key} must be an integer >= {low}, got {v!r}")
        for key, closed in (("snapshot_win_rate", False), ("self_play", True), ("random_share", True)):
            v = getattr(league, key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not (0 <= v <= 1 if closed else 0 < v <= 1):
                allowed_range = "[0, 1]" if closed else "(0, 1]"
                raise MappingError(f"multi_agent.league.{key} must be a number in {allowed_range}, got {v!r}")
        if league.self_play + league.random_share > 1:
            raise MappingError(f"multi_agent.league.self_play + random_share must be <= 1 (the rest is snapshots), got "
                               f"{league.self_play} + {league.random_share}")
        share = league.main_share
        if share is not None and (not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 < share <= 1):
            raise MappingError(f"multi_agent.league.main_share must be null or a number in (0, 1], got {share!r}")
        if share is not None and share < 1 and league.main_exploiters + league.league_exploiters == 0:
            raise MappingError(f"multi_agent.league.main_share={share} leaves episodes to exploiters, but the league has none")
        if league.pfsp not in PFSP_WEIGHTINGS:
            raise MappingError(f"multi_agent.league.pfsp must be one of {list(PFSP_WEIGHTINGS)}, got {league.pfsp!r}")
        if league.snapshot_against not in SNAPSHOT_AGAINST:
            raise MappingError(f"multi_agent.league.snapshot_against must be one of {list(SNAPSHOT_AGAINST)}, "
                               f"got {league.snapshot_against!r}")
        if league.evaluation_opponent is not None:
            opponent_module_class(league.evaluation_opponent, "multi_agent.league.evaluation_opponent")
        return league

    # -- members --------------------------------------------------------------
    def roles(self) -> dict[str, str]:
        """Trained member id -> its role, main agents first."""
        p = self.policy
        out = {p if i == 0 else f"{p}{i}": "main_agent" for i in range(self.main_agents)}
        out.update({f"main_exploiter{i}": "main_exploiter" for i in range(self.main_exploiters)})
        out.update({f"league_exploiter{i}": "league_exploiter" for i in range(self.league_exploiters)})
        return out

    @property
    def trained_ids(self) -> list[str]:
        return list(self.roles())

    @property
    def main_ids(self) -> list[str]:
        return [m for m, role in self.roles().items() if role == "main_agent"]

    @property
    def snapshot_ids(self) -> list[str]:
        return [f"{self.policy}@{k}" for k in range(self.max_snapshots)]

    @property
    def random_ids(self) -> list[str]:  # the permanent random member, where the main agents play it
        return [self.RANDOM_ID] if self.random_share > 0 else []

    @property
    def opponent_ids(self) -> list[str]:  # what evaluation replaces by its fixed opponent (as self-play's pool)
        return [m for m in self.trained_ids + self.snapshot_ids + self.random_ids if m != self.policy]

    def add_pool(self, specs: dict[str, PolicySpec]) -> dict[str, PolicySpec]:
        """The declared specs plus every other member's: copies of `policy`'s module and model, and the random player."""
        out = with_copies(specs, self.policy, self.trained_ids[1:] + self.snapshot_ids, "multi_agent.league")
        for pid in self.random_ids:
            if pid in specs:
                raise MappingError(f"multi_agent.league.random_share > 0 adds the member {pid!r}, which is also a declared "
                                   f"policy; rename that policy")
            main = out[self.policy]
            out[pid] = PolicySpec(RandomPolicy, {}, main.observation_space, main.action_space, self.policy)
        return out

    def learner_weights(self) -> list[list]:
        """[[trained member, probability of being an episode's learner], ...]."""
        roles = self.roles()
        if self.main_share is None:
            return [[m, 1.0 / len(roles)] for m in roles]
        exploiters = [m for m, role in roles.items() if role != "main_agent"]
        return [[m, self.main_share / self.main_agents] for m in self.main_ids] + [
            [m, (1.0 - self.main_share) / len(exploiters)] for m in exploiters]

    # -- evaluation against a fixed opponent (the same interface as SelfPlay's) ----------------------
    def with_opponent(self, opponent) -> "League":
        if opponent is not None:
            opponent_module_class(opponent, "opponent")
        return League(**{**asdict(self), "evaluation_opponent": opponent})

    def evaluation_policies(self, policies: dict) -> dict:
        return with_fixed_opponent(policies, self.policy, self.evaluation_opponent)

    def evaluation_mapping(self, agent_id: str, episode) -> str:
        """The first main agent in one seat (first or second at random), the fixed opponent in the other."""
        if episode is None:
            return self.policy
        main_first = random.Random(episode.id).random() < 0.5
        bound = episode.policy_of
        if not bound:
            return self.policy if main_first else self.OPPONENT_ID
        return self.OPPONENT_ID if self.policy in bound.values() else self.policy


class LeagueMapping:
    """The runners' side of matchmaking: (learner, opponent) per episode from the table `set_state` gives.

    The table: {"learners": [[trained id, probability], ...], "opponents": {learner: [[policy id, probability], ...]}}.
    Before the first table arrives every learner plays the main agents.
    """

    def __init__(self, league: League, seed: int = 0):
        self.league, self.seed = league, seed
        self.table = {"learners": league.learner_weights(),
                      "opponents": {m: [[p, 1.0 / league.main_agents] for p in league.main_ids] for m in league.trained_ids}}
        self._pairs: dict = {}  # episode id -> (first seat's policy, second's), until both are seated

    def set_state(self, table: dict) -> None:
        self.table = table

    def get_state(self) -> dict:
        return self.table

    def draw(self, episode_id) -> tuple[str, str]:
        """(learner, opponent) of an episode: the same for every call with this episode id and table."""
        rng = random.Random(f"{self.seed}/{episode_id}")
        learners, shares = zip(*self.table["learners"])
        learner = rng.choices(learners, weights=shares)[0]
        ids, probs = zip(*self.table["opponents"][learner])
        return learner, rng.choices(ids, weights=probs)[0]

    def __call__(self, agent_id: str, episode) -> str:
        if episode is None:  # resolving spaces before any episode
            return self.league.policy
        if episode.policy_of:  # the second seat: the other half of the pair drawn for the first
            pair = self._pairs.pop(episode.id, None) or self.seats(episode.id)
            return pair[1]
        pair = self._pairs[episode.id] = self.seats(episode.id)
        if len(self._pairs) > 10_000:  # episodes that never seated a second agent
            self._pairs.pop(next(iter(self._pairs)))
        return pair[0]

    def seats(self, episode_id) -> tuple[str, str]:
        learner, opponent = self.draw(episode_id)
        return (learner, opponent) if random.Random(f"seat/{episode_id}").random() < 0.5 else (opponent, learner)
