"""Where every runner's random streams come from: (`debugging.seed`, worker index, incarnation, key)."""

from __future__ import annotations

import numpy as np

# The key of a batched simulator's own seed (one per runner; no env copy uses it): VMAS's dict path and the
# batched path draw the same seed from it, so both see the same worlds.
BATCH_SEED_KEY = 1 << 20


def seed_sequence(seed: int | None, *key: int) -> np.random.SeedSequence:
    """The SeedSequence of a component identified by `key` (None: fresh OS entropy)."""
    return np.random.SeedSequence(seed, spawn_key=tuple(int(k) for k in key))


def batch_seed(seed: int | None, worker_index: int, incarnation: int) -> int:
    """The seed of a runner's batched simulator: the batched path and the dict path over its worlds use this one."""
    return int(seed_sequence(seed, worker_index, incarnation, BATCH_SEED_KEY).generate_state(1, np.uint32)[0] >> np.uint32(1))
