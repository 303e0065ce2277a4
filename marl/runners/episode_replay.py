"""Checkpoints of in-progress episodes without pickling envs: how an episode started, and its actions since.

A runner saves, per env copy, the reset seed (or the state of the env's own
generator) of the episode in progress and the actions taken since, plus a
digest of the observations reached; resuming resets the env the same way and
replays the actions. That restores the env exactly for any env whose
randomness comes from that seed or generator; the digest checks it.
"""

from __future__ import annotations

import hashlib
import logging

import numpy as np

from marl.envs import EnvOutputError
from marl.envs.base import ALL
from marl.envs.validation import unpack_step

log = logging.getLogger(__name__)


def obs_digest(obs: dict) -> str:
    """A hash of an observation dict (arrays by dtype, shape and bytes), to check a replayed episode."""
    h = hashlib.sha1()

    def add(value):
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                h.update(str(key).encode())
                add(value[key])
        elif isinstance(value, (list, tuple)):
            for v in value:
                add(v)
        else:
            a = np.asarray(value)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())

    add(obs)
    return h.hexdigest()


def replay_episode(env, start: dict, actions: list, digest: str, label: str) -> dict:
    """Resets `env` as the saved episode started ({"seed": s} or {"rng": generator state}), replays
    `actions`, and returns the observations reached (a warning when they differ from `digest`)."""
    if "seed" in start:
        seed = start["seed"]
        obs, _ = env.reset(seed=seed)
    else:
        seed = "none, generator state saved"
        env.reset(seed=0)  # an env in a defined state first; then its generator as it was, and the real reset
        source = env.np_random_source()
        if source is None:
            raise EnvOutputError(f"{label}: the checkpoint holds its generator state, but it has no np_random now")
        if isinstance(source, np.random.Generator):
            source.bit_generator.state = start["rng"]
        else:
            source.set_state(start["rng"])
        obs, _ = env.reset(seed=None)
    for t, step_actions in enumerate(actions):
        obs, _, terminateds, truncateds, _ = unpack_step(env.step(step_actions), label)
        if terminateds.get(ALL, False) or truncateds.get(ALL, False):
            raise EnvOutputError(
                f"{label}: replaying the saved episode (reset seed {seed}) ended it at step {t + 1} "
                f"of {len(actions)}: the env is not deterministic given its reset seed and actions"
            )
        ended = [a for a, d in terminateds.items() if d] + [a for a, d in truncateds.items() if d]
        if ended:
            obs = dict(obs)
            for agent in ended:
                obs.pop(agent, None)
    if obs_digest(obs) != digest:
        log.warning(
            "%s: replaying the saved episode (reset seed %s, %d steps) gave other observations than at save time: "
            "the env is not deterministic given its reset seed and actions, so this resume is not exact",
            label, seed, len(actions),
        )
    return obs
