"""Which batched adapter makes an env name: `vmas.<scenario>`, `jaxmarl.<env id>`, a name given to
`register_batched_env`, or (with `env_runners.batched: true` only) a Gymnasium id, as its vector env.

`make_batched_env(name, env_config, num_worlds, seed, device)` is what `BatchedEnvRunner` calls;
`natively_batched(name)` says whether `env_runners.batched: auto` takes the batched path for it.
Each adapter imports its simulator package only when it is asked for.

A user's own batched simulator: `register_batched_env("my_swarm", creator)` with
`creator(env_config, num_worlds, seed, device) -> BatchedEnv` (`marl.envs.batched`).
"""

from __future__ import annotations

from typing import Any, Callable

from marl.envs.base import EnvError
from marl.envs.batched import BatchedEnv
from marl.envs.gym_vector import GymVectorEnv, is_gymnasium_id
from marl.envs.jaxmarl import PREFIX as JAXMARL_PREFIX, JaxMarlEnv
from marl.envs.vmas import PREFIX as VMAS_PREFIX, VmasEnv

NATIVE_PREFIXES = (VMAS_PREFIX, JAXMARL_PREFIX)
_REGISTERED: dict[str, Callable[..., BatchedEnv]] = {}


def register_batched_env(name: str, creator: Callable[..., BatchedEnv]) -> None:
    """`creator(env_config, num_worlds, seed, device)` makes env `name` (a `BatchedEnv`) for the batched path."""
    _REGISTERED[name] = creator


def is_registered_batched(name: str | None) -> bool:
    """A name given to `register_batched_env`."""
    return name in _REGISTERED


def natively_batched(name: str | None) -> bool:
    """An env that simulates many worlds in one object (the batched path is its default)."""
    return isinstance(name, str) and (name in _REGISTERED or name.startswith(NATIVE_PREFIXES))


def make_batched_env(name: str, env_config: dict[str, Any], num_worlds: int, seed: int | None, device) -> BatchedEnv:
    creator = _REGISTERED.get(name)
    if creator is not None:
        env = creator(dict(env_config), num_worlds, seed, device)
        if not isinstance(env, BatchedEnv) or env.num_worlds != num_worlds:
            raise EnvError(f"the creator registered for batched env {name!r} must return a marl.envs.batched.BatchedEnv "
                           f"of {num_worlds} worlds; got {type(env).__name__}")
        return env
    if name.startswith(VMAS_PREFIX):
        return VmasEnv(name, env_config, num_worlds, seed, device)
    if name.startswith(JAXMARL_PREFIX):
        return JaxMarlEnv(name, env_config, num_worlds, seed, device, stack=True)
    if is_gymnasium_id(name):
        return GymVectorEnv(name, env_config, num_worlds, seed, device)
    raise EnvError(
        f"env {name!r} has no batched adapter (env_runners.batched: true); batched envs: vmas.<scenario>, "
        "jaxmarl.<env id>, Gymnasium ids (their vector envs) and names given to marl.register_batched_env"
    )
