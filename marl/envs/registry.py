"""Turning env names and env objects into :class:`MultiAgentEnv` instances.

``make_env(name, env_config)`` is the single entry point the rest of the
framework uses, so a config can name an env by a registered name, a
PettingZoo module path or a Gymnasium id.  When nothing matches, the error
lists every resolution attempt and why it failed, which is far easier to act
on than the last exception of a chain of guesses.

The registry is a plain per-process dict: processes that create envs (e.g.
remote workers) must have run the same ``register_env`` calls, typically by
importing the module that makes them.
"""

from __future__ import annotations

import difflib
import importlib
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium
from pettingzoo.utils.env import AECEnv, ParallelEnv

from marl.envs.base import EnvError, MultiAgentEnv
from marl.envs.gymnasium import GymnasiumAdapter
from marl.envs.pettingzoo import AECEnvAdapter, ParallelEnvAdapter

EnvCreator = Callable[[dict[str, Any]], Any]

_REGISTRY: dict[str, EnvCreator] = {}

_ENV_API_KEY = "env_api"
_ENV_APIS = ("parallel", "aec")


def wrap_env(obj: Any) -> MultiAgentEnv:
    """Adapt ``obj`` to :class:`MultiAgentEnv`.

    Accepts a ``MultiAgentEnv`` (returned as is), a PettingZoo ``ParallelEnv``
    or ``AECEnv``, or a ``gymnasium.Env``.
    """
    if isinstance(obj, MultiAgentEnv):
        return obj
    if isinstance(obj, ParallelEnv):
        return ParallelEnvAdapter(obj)
    if isinstance(obj, AECEnv):
        return AECEnvAdapter(obj)
    if isinstance(obj, gymnasium.Env):
        return GymnasiumAdapter(obj)
    raise EnvError(
        f"cannot use an object of type {type(obj).__module__}.{type(obj).__qualname__} "
        "as an env; expected a marl MultiAgentEnv, a PettingZoo ParallelEnv, "
        "a PettingZoo AECEnv or a gymnasium.Env instance"
    )


def register_env(name: str, creator: EnvCreator) -> None:
    """Register ``creator(env_config) -> env`` under ``name`` (replacing any previous one).

    The creator may return anything :func:`wrap_env` accepts.
    """
    if not isinstance(name, str) or not name:
        raise EnvError(f"env name must be a non-empty string, got {name!r}")
    if not callable(creator):
        raise EnvError(f"creator for env {name!r} must be callable, got {type(creator).__name__}")
    _REGISTRY[name] = creator


def registered_envs() -> list[str]:
    """Names given to :func:`register_env`, sorted."""
    return sorted(_REGISTRY)


def make_env(name: str, env_config: dict[str, Any] | None = None) -> MultiAgentEnv:
    """Create the env called ``name`` with ``env_config``.

    Resolution order: a :func:`register_env` name; a PettingZoo-style module
    path (``mpe2.simple_spread_v3``: its ``parallel_env`` is preferred over
    ``env`` unless ``env_config["env_api"]`` is ``"parallel"`` or ``"aec"``;
    either may also return a marl ``MultiAgentEnv``, used as it is);
    a Gymnasium id (``CartPole-v1``, passed ``env_config`` as ``make`` kwargs).
    Raises :class:`EnvError` if nothing resolves or ``env_config`` is rejected.
    """
    config = dict(env_config or {})
    tried: list[str] = []

    creator = _REGISTRY.get(name)
    if creator is not None:
        made = _call(name, creator, config)
        try:
            return wrap_env(made)
        except EnvError as e:
            raise EnvError(
                f"creator registered for env {name!r} returned an unusable object: {e}"
            ) from None
    tried.append("register_env: no env registered under that name")

    env = _try_module(name, config, tried)
    if env is not None:
        return env

    env = _try_gymnasium(name, config, tried)
    if env is not None:
        return env

    raise EnvError(
        f"unknown env {name!r}: tried {'; '.join(tried)}. "
        f"Registered envs: {registered_envs() or 'none'}{_suggestions(name)}"
    )


def _call(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call an env constructor, turning a rejected config key into a clear EnvError."""
    try:
        return fn(*args, **kwargs)
    except TypeError as e:
        config = kwargs or (args[0] if args and isinstance(args[0], dict) else {})
        text = str(e)
        bad = [k for k in config if f"'{k}'" in text]
        what = f"env_config key(s) {bad}" if bad else "its env_config"
        raise EnvError(f"env {name!r} rejected {what}: {text}") from e


def _try_module(name: str, config: dict[str, Any], tried: list[str]) -> MultiAgentEnv | None:
    """Resolve ``name`` as an importable PettingZoo env module, or record why not."""
    if "." not in name or not all(part.isidentifier() for part in name.split(".")):
        tried.append("PettingZoo module: not a dotted module path")
        return None
    try:
        with warnings.catch_warnings():
            # PettingZoo nags that module imports are the "old creation API";
            # importing the module is exactly how this resolution step works.
            warnings.filterwarnings(
                "ignore", message="The old environment creation API", category=DeprecationWarning
            )
            module = importlib.import_module(name)
    except Exception as e:  # ImportError, or the module failing while importing
        tried.append(f"PettingZoo module: import failed ({type(e).__name__}: {e})")
        return None

    api = config.pop(_ENV_API_KEY, None)
    if api is not None and api not in _ENV_APIS:
        raise EnvError(
            f"env {name!r}: env_config[{_ENV_API_KEY!r}] must be one of "
            f"{list(_ENV_APIS)}, got {api!r}"
        )
    has_parallel = callable(getattr(module, "parallel_env", None))
    has_aec = callable(getattr(module, "env", None))
    if api == "parallel" or (api is None and has_parallel):
        if not has_parallel:
            raise EnvError(
                f"env {name!r}: env_api='parallel' but module {name} has no parallel_env()"
            )
        made = _call(name, module.parallel_env, **config)
        # A module may also hand out a marl MultiAgentEnv directly (one written against the protocol).
        return made if isinstance(made, MultiAgentEnv) else ParallelEnvAdapter(made)
    if api == "aec" or (api is None and has_aec):
        if not has_aec:
            raise EnvError(f"env {name!r}: env_api='aec' but module {name} has no env()")
        made = _call(name, module.env, **config)
        return made if isinstance(made, MultiAgentEnv) else AECEnvAdapter(made)
    tried.append(f"PettingZoo module: {name} imported but has neither parallel_env() nor env()")
    return None


def _try_gymnasium(name: str, config: dict[str, Any], tried: list[str]) -> MultiAgentEnv | None:
    """Resolve ``name`` as a Gymnasium id, or record why not."""
    if ":" in name:
        # "module:EnvId" form: gymnasium imports the module, which registers the id.
        try:
            env = _call(name, gymnasium.make, name, **config)
        except (ImportError, gymnasium.error.Error) as e:
            tried.append(f"Gymnasium id: {type(e).__name__}: {e}")
            return None
        return GymnasiumAdapter(env)
    if name not in gymnasium.envs.registry:
        tried.append("Gymnasium id: not in gymnasium.envs.registry")
        return None
    return GymnasiumAdapter(_call(name, gymnasium.make, name, **config))


def _suggestions(name: str) -> str:
    """A "did you mean" tail from registered names and Gymnasium ids, if any are close."""
    candidates = list(_REGISTRY) + list(gymnasium.envs.registry)
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.75)
    return f". Did you mean: {', '.join(close)}?" if close else ""


def registered_creator(name: str) -> EnvCreator | None:
    """The creator registered under ``name``, or None (used to ship it to runner processes)."""
    return _REGISTRY.get(name)
