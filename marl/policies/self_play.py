"""Self-play: one trained policy against a pool of its own frozen snapshots.

Declared as `multi_agent.self_play: {policy, pool_size, snapshot_every, elo_k}`.
The pool is `pool_size` extra policies (`<policy>@0`, `<policy>@1`, ...):
same module and model as the trained policy, never trained themselves; the
`snapshot_opponents` workflow node copies the trained policy's weights into
them, one slot after the other, every `snapshot_every` learner updates.

At each episode start the mapping puts the trained policy in one seat (first
or second to act, at random) and one snapshot, drawn uniformly from the
pool, in the other seat(s). The draw is seeded by the episode id, so it is
the same for every agent of the episode and reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from marl.policies.mapping import MappingError, PolicySpec


@dataclass
class SelfPlay:
    policy: str = "main"
    pool_size: int = 4
    snapshot_every: int = 5
    elo_k: float = 16.0

    @staticmethod
    def from_any(value) -> "SelfPlay | None":
        if value is None or isinstance(value, SelfPlay):
            return value
        if not isinstance(value, dict):
            raise MappingError(f"multi_agent.self_play must be a mapping {{policy, pool_size, snapshot_every, elo_k}} or null, got {value!r}")
        allowed = {"policy", "pool_size", "snapshot_every", "elo_k"}
        unknown = set(value) - allowed
        if unknown:
            raise MappingError(f"multi_agent.self_play: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        sp = SelfPlay(**value)
        for key in ("pool_size", "snapshot_every"):
            if not isinstance(getattr(sp, key), int) or getattr(sp, key) < 1:
                raise MappingError(f"multi_agent.self_play.{key} must be an integer >= 1, got {getattr(sp, key)!r}")
        return sp

    @property
    def opponent_ids(self) -> list[str]:
        return [f"{self.policy}@{i}" for i in range(self.pool_size)]

    def add_pool(self, specs: dict[str, PolicySpec]) -> dict[str, PolicySpec]:
        """The declared specs plus the pool's: copies of the trained policy's module and model."""
        main = specs.get(self.policy)
        if main is None:
            raise MappingError(f"multi_agent.self_play.policy '{self.policy}' is not a declared policy; declared: {list(specs)}")
        out = dict(specs)
        for pid in self.opponent_ids:
            out.setdefault(pid, PolicySpec(main.module_class, dict(main.model), main.observation_space, main.action_space, self.policy))
        return out

    def mapping(self, agent_id: str, episode) -> str:
        if episode is None:  # resolving spaces before any episode: every seat is the trained policy's
            return self.policy
        rng = random.Random(episode.id)
        main_first = rng.random() < 0.5
        opponent = self.opponent_ids[rng.randrange(self.pool_size)]
        bound = episode.policy_of
        if not bound:
            return self.policy if main_first else opponent
        return opponent if self.policy in bound.values() else self.policy


class EloTracker:
    """An Elo-like rating of the trained policy against the pool, plus win/draw counts.

    Each game moves the trained policy's rating and its opponent's by
    K * (score - expected); a fresh snapshot starts at the trained policy's rating.
    """

    def __init__(self, self_play: SelfPlay, initial: float = 1000.0):
        self.sp = self_play
        self.rating = initial
        self.pool = {pid: initial for pid in self_play.opponent_ids}

    def snapshot(self, slot: str) -> None:
        self.pool[slot] = self.rating

    def record(self, episode: dict) -> float | None:
        """Score (1 win, 0.5 draw, 0 loss) of a finished episode's trained policy; None if it did not play the pool."""
        returns = episode["policy_returns"]
        opponents = [pid for pid in returns if pid in self.pool]
        if self.sp.policy not in returns or not opponents:
            return None
        opponent = opponents[0]
        mine, theirs = returns[self.sp.policy], returns[opponent]
        score = 1.0 if mine > theirs else 0.5 if mine == theirs else 0.0
        expected = 1.0 / (1.0 + 10 ** ((self.pool[opponent] - self.rating) / 400.0))
        delta = self.sp.elo_k * (score - expected)
        self.rating += delta
        self.pool[opponent] -= delta
        return score
