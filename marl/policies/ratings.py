"""Ratings of a population's members from match results: Elo, openskill and a win-rate matrix.

Every match between two members is recorded once, as the score of the first (1 win, 0.5 draw,
0 loss). Elo moves both ratings by `k * (score - expected)`; openskill's Plackett-Luce model
keeps a (mu, sigma) per member and rates by its ordinal `mu - 3 sigma`, which starts low and
rises as a member's record firms up. The counts give the win-rate matrix (draws count half).
A new member (a snapshot) may start from another's ratings (`like=`), as AlphaStar's do.

`metrics()` is what a population workflow logs each iteration: `league/rating/<member>` (the
openskill ordinal), `league/elo/<member>`; `history` keeps one row of those per `log_point()`,
which `marl league RUN_DIR` draws as rating curves. `get_state()` is plain JSON.
"""

from __future__ import annotations

import numpy as np
from openskill.models import PlackettLuce

from marl.errors import ConfigError


class Ratings:
    def __init__(self, elo_k: float = 16.0, initial_elo: float = 1000.0):
        if not (isinstance(elo_k, (int, float)) and 0 < elo_k <= 400):
            raise ConfigError(f"elo_k must be a number in (0, 400], got {elo_k!r}")
        self.elo_k, self.initial_elo = float(elo_k), float(initial_elo)
        self._model = PlackettLuce()
        self.members: list[str] = []
        self.elo: dict[str, float] = {}
        self.skill: dict[str, tuple[float, float]] = {}  # member -> (mu, sigma)
        self.counts: dict[tuple[str, str], list[float]] = {}  # (a, b) -> [score sum of a, games]
        self.history: list[dict[str, float]] = []

    def add(self, member: str, like: str | None = None) -> None:
        if member in self.elo:
            raise ConfigError(f"population member {member!r} is already rated")
        self.members.append(member)
        if like is None:
            fresh = self._model.rating()
            self.elo[member], self.skill[member] = self.initial_elo, (fresh.mu, fresh.sigma)
        else:
            self.elo[member], self.skill[member] = self.elo[like], self.skill[like]

    def record(self, a: str, b: str, score: float) -> None:
        """One match of `a` against `b`; `score` is a's: 1 win, 0.5 draw, 0 loss."""
        for m in (a, b):
            if m not in self.elo:
                raise ConfigError(f"match result for {m!r}, which is not a rated member; members: {self.members}")
        if score not in (0.0, 0.5, 1.0):
            raise ConfigError(f"a match score must be 1 (win), 0.5 (draw) or 0 (loss), got {score!r}")
        expected = 1.0 / (1.0 + 10 ** ((self.elo[b] - self.elo[a]) / 400.0))
        delta = self.elo_k * (score - expected)
        self.elo[a] += delta
        self.elo[b] -= delta
        ranks = [0, 0] if score == 0.5 else [0, 1] if score == 1.0 else [1, 0]
        (ra,), (rb,) = self._model.rate([[self._rating(a)], [self._rating(b)]], ranks=ranks)
        self.skill[a], self.skill[b] = (ra.mu, ra.sigma), (rb.mu, rb.sigma)
        for key, s in (((a, b), score), ((b, a), 1.0 - score)):
            tally = self.counts.setdefault(key, [0.0, 0.0])
            tally[0] += s
            tally[1] += 1

    def _rating(self, member: str):
        mu, sigma = self.skill[member]
        return self._model.rating(mu=mu, sigma=sigma)

    def ordinal(self, member: str) -> float:
        mu, sigma = self.skill[member]
        return mu - 3.0 * sigma

    def win_rates(self, members: list[str] | None = None) -> np.ndarray:
        """[i, j]: member i's mean score against member j (NaN where they never met)."""
        members = self.members if members is None else members
        out = np.full((len(members), len(members)), np.nan)
        for i, a in enumerate(members):
            for j, b in enumerate(members):
                tally = self.counts.get((a, b))
                if tally and tally[1]:
                    out[i, j] = tally[0] / tally[1]
        return out

    def games(self, a: str, b: str) -> int:
        return int(self.counts.get((a, b), (0, 0))[1])

    def metrics(self) -> dict[str, float]:
        out = {}
        for m in self.members:
            out[f"league/rating/{m}"] = self.ordinal(m)
            out[f"league/elo/{m}"] = self.elo[m]
        return out

    def log_point(self, step: int) -> dict[str, float]:
        """Appends this moment's ratings to `history` (one row: step plus `metrics()`) and returns them."""
        row = {"step": float(step), **self.metrics()}
        self.history.append(row)
        return row

    def table(self) -> list[dict]:
        """One row per member, best openskill ordinal first: rating, mu, sigma, elo, games, mean score."""
        rows = []
        for m in self.members:
            played = [(t[0], t[1]) for (a, _), t in self.counts.items() if a == m]
            games = sum(g for _, g in played)
            rows.append({"member": m, "rating": self.ordinal(m), "mu": self.skill[m][0], "sigma": self.skill[m][1],
                         "elo": self.elo[m], "games": int(games),
                         "score": sum(s for s, _ in played) / games if games else float("nan")})
        return sorted(rows, key=lambda r: -r["rating"])

    def get_state(self) -> dict:
        return {"elo_k": self.elo_k, "initial_elo": self.initial_elo, "members": list(self.members), "elo": dict(self.elo),
                "skill": {m: list(s) for m, s in self.skill.items()},
                "counts": [[a, b, t[0], t[1]] for (a, b), t in self.counts.items()], "history": [dict(r) for r in self.history]}

    def set_state(self, state: dict) -> None:
        self.elo_k, self.initial_elo = float(state["elo_k"]), float(state["initial_elo"])
        self.members = list(state["members"])
        self.elo = {m: float(v) for m, v in state["elo"].items()}
        self.skill = {m: (float(s[0]), float(s[1])) for m, s in state["skill"].items()}
        self.counts = {(a, b): [float(s), float(g)] for a, b, s, g in state["counts"]}
        self.history = [dict(r) for r in state["history"]]

    @classmethod
    def from_state(cls, state: dict) -> Ratings:
        out = cls()
        out.set_state(state)
        return out
