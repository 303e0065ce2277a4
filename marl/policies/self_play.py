"""Self-play: one trained policy against a pool of its own frozen snapshots.

Declared as `multi_agent.self_play: {policy, pool_size, snapshot_every, elo_k, evaluation_opponent}`.
The pool is `pool_size` extra policies (`<policy>@0`, `<policy>@1`, ...):
same module and model as the trained policy, never trained themselves; the
`snapshot_opponents` workflow node copies the trained policy's weights into
them, one slot after the other, every `snapshot_every` learner updates.

At each episode start the mapping puts the trained policy in one seat (first
or second to act, at random) and one snapshot, drawn uniformly from the
pool, in the other seat(s). The draw is seeded by the episode id, so it is
the same for every agent of the episode and reproducible.

Training against itself says little about strength: the pool's win rate
stays near 0.5 by design. `evaluation_opponent` names a fixed opponent
("random": a uniformly random legal-move player, or an RLModule class
path) that evaluation seats against the trained policy instead of the pool;
`evaluation/self_play/win_rate` then measures progress against a yardstick
that does not move.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from marl.errors import unknown_key
from marl.policies.mapping import MappingError, PolicySpec
from marl.modules.random_policy import RandomPolicy
from marl.import_paths import import_object
from marl.modules.rl_module import RLModule


@dataclass
class SelfPlay:
    policy: str = "main"
    pool_size: int = 4
    snapshot_every: int = 5
    elo_k: float = 16.0
    evaluation_opponent: str | type | None = None

    # The evaluation runners' name for the fixed opponent; a policy id no user spec can clash with.
    OPPONENT_ID = "evaluation_opponent"

    @staticmethod
    def from_any(value) -> "SelfPlay | None":
        if value is None or isinstance(value, SelfPlay):
            return value
        if not isinstance(value, dict):
            raise MappingError(
                "multi_agent.self_play must be a mapping {policy, pool_size, snapshot_every, elo_k, evaluation_opponent} "
                f"or null, got {value!r}"
            )
        allowed = {"policy", "pool_size", "snapshot_every", "elo_k", "evaluation_opponent"}
        for key in value:
            if key not in allowed:
                raise unknown_key(f"multi_agent.self_play.{key}", allowed, "self_play holds", MappingError)
        sp = SelfPlay(**value)
        for key in ("pool_size", "snapshot_every"):
            if not isinstance(getattr(sp, key), int) or getattr(sp, key) < 1:
                raise MappingError(f"multi_agent.self_play.{key} must be an integer >= 1, got {getattr(sp, key)!r}")
        if sp.evaluation_opponent is not None:
            opponent_module_class(sp.evaluation_opponent, "multi_agent.self_play.evaluation_opponent")
        return sp

    @property
    def opponent_ids(self) -> list[str]:
        return [f"{self.policy}@{i}" for i in range(self.pool_size)]

    def add_pool(self, specs: dict[str, PolicySpec]) -> dict[str, PolicySpec]:
        """The declared specs plus the pool's: copies of the trained policy's module and model."""
        return with_copies(specs, self.policy, self.opponent_ids, "multi_agent.self_play")

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

    def with_opponent(self, opponent: str | None) -> "SelfPlay":
        """This self-play setup with another evaluation opponent (None: evaluation plays the pool)."""
        if opponent is not None:
            opponent_module_class(opponent, "opponent")
        return SelfPlay(self.policy, self.pool_size, self.snapshot_every, self.elo_k, opponent)

    def evaluation_policies(self, policies: dict) -> dict:
        """The declared policies plus the fixed evaluation opponent (no weights to sync: it is never trained)."""
        return with_fixed_opponent(policies, self.policy, self.evaluation_opponent)

    def evaluation_mapping(self, agent_id: str, episode) -> str:
        """Like `mapping`, with the fixed opponent in every seat the trained policy does not take."""
        pid = self.mapping(agent_id, episode)
        return self.OPPONENT_ID if pid in self.opponent_ids else pid


def with_copies(specs: dict[str, PolicySpec], policy: str, ids: list[str], section: str) -> dict[str, PolicySpec]:
    """`specs` plus a copy of `policy`'s module and model under each of `ids` (a pool's or a league's members)."""
    main = specs.get(policy)
    if main is None:
        raise MappingError(f"{section}.policy '{policy}' is not a declared policy; declared: {list(specs)}")
    out = dict(specs)
    for pid in ids:
        out.setdefault(pid, PolicySpec(main.module_class, dict(main.model), main.observation_space, main.action_space, policy))
    return out


def with_fixed_opponent(policies: dict, policy: str, opponent) -> dict:
    """The declared policies plus the fixed evaluation opponent (no weights to sync: it is never trained), with
    `policy`'s spaces."""
    spec = {"module_class": opponent_module_class(opponent), "spaces_from": policy}
    return {**policies, SelfPlay.OPPONENT_ID: spec}


def opponent_module_class(name, where: str = "opponent"):
    """The module class an evaluation opponent names: "random", an RLModule class path 'pkg.mod:Class' or the class."""

    if name == "random":
        return RandomPolicy
    if isinstance(name, type) and issubclass(name, RLModule):
        return name
    if not isinstance(name, str) or not name.strip():
        raise MappingError(f"{where} must be 'random' or an RLModule class path 'pkg.module:Class', got {name!r}")
    try:
        cls = import_object(name)
    except (ImportError, AttributeError, ValueError) as err:
        raise MappingError(
            f"{where} {name!r} cannot be imported ({err}); allowed: 'random' or an RLModule class path 'pkg.module:Class'"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, RLModule)):
        raise MappingError(f"{where} {name!r} is not a subclass of marl.RLModule")
    return cls


def score(episode: dict, policy: str) -> float | None:
    """1 win, 0.5 draw, 0 loss for `policy` in a finished episode (its return against the best other policy's)."""
    returns = episode["policy_returns"]
    others = [r for pid, r in returns.items() if pid != policy]
    if policy not in returns or not others:
        return None
    mine, theirs = returns[policy], max(others)
    return 1.0 if mine > theirs else 0.5 if mine == theirs else 0.0


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
