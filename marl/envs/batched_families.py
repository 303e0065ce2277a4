"""Which batched adapter makes an env name: `vmas.<scenario>`, and a Gymnasium id as its vector env.

`make_batched_env(name, env_config, num_worlds, seed, device)` is what `BatchedEnvRunner` calls;
`natively_batched(name)` says whether `env_runners.batched: auto` takes the batched path for it.
Each adapter imports its simulator package only when it is asked for.
"""

from __future__ import annotations

from typing import Any

from marl.envs.base import EnvError
from marl.envs.batched import BatchedEnv
from marl.envs.vmas import PREFIX as VMAS_PREFIX, VmasEnv

NATIVE_PREFIXES = (VMAS_PREFIX,)


def natively_batched(name: str | None) -> bool:
    """An env that simulates many worlds in one object (the batched path is its default)."""
    return isinstance(name, str) and name.startswith(NATIVE_PREFIXES)


def make_batched_env(name: str, env_config: dict[str, Any], num_worlds: int, seed: int | None, device) -> BatchedEnv:
    if name.startswith(VMAS_PREFIX):
        return VmasEnv(name, env_config, num_worlds, seed, device)
    raise EnvError(
        f"env {name!r} has no batched adapter (env_runners.batched: true); batched envs: vmas.<scenario>"
    )
