"""Where every runner's random streams come from: (`debugging.seed`, worker index, incarnation, key)."""

from __future__ import annotations

import numpy as np

# The key of a batched simulator's own seed (one per runner; no env copy uses it): VMAS's dict path and the
# batched path draw the same seed from it, so both see the same worlds.
BATCH_SEED_KEY = 1 << 20


def seed_sequence(seed: int | None, *key: int) -> np.random.SeedSequence:
    """The SeedSequence of a component identified by `key` (None: fresh OS entropy)."""
    return np.random.SeedSequence(seed, spawn_key=tuple(int(k) for k in key))
