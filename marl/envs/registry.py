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
import pkgutil
import re
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium
from pettingzoo.utils.env import AECEnv, ParallelEnv

from marl.envs.base import EnvError, MultiAgentEnv
from marl.envs.copies import PREFIX as COPIES_PREFIX, make_copies_env
from marl.envs.batched_families import is_registered_batched, make_batched_env
from marl.envs.batched_view import single_world
from marl.envs.gymnasium import GymnasiumAdapter, TupleMultiAgentAdapter, is_multi_agent_tuple_env
from marl.envs.jaxmarl import JaxMarlEnv  # (jax itself is imported only when a jaxmarl.* env is made)
from marl.envs.mamujoco import is_mamujoco, make_mamujoco_env  # (mujoco is imported only when a mamujoco.* env is made)
from marl.envs.openspiel import make_openspiel_env  # (pyspiel itself is imported only when an openspiel.* env is made)
from marl.envs.pettingzoo import AECEnvAdapter, ParallelEnvAdapter
from marl.envs.vmas import make_vmas_env  # (vmas itself is imported only when a vmas.* env is made)
from marl.envs.wrappers import apply_wrappers, image_wrappers, is_auto

EnvCreator = Callable[[dict[str, Any]], Any]

_REGISTRY: dict[str, EnvCreator] = {}

_ENV_API_KEY = "env_api"
_ENV_APIS = ("parallel", "aec")


def wrap_env(obj: Any) -> MultiAgentEnv:
    """Adapt ``obj`` to :class:`MultiAgentEnv`, chosen from what the object is.

    Accepts a ``MultiAgentEnv`` (returned as is), a PettingZoo ``ParallelEnv`` or
    ``AECEnv``, a ``gymnasium.Env`` (one agent, or one per entry of Tuple
    observation/action spaces: lbforaging, rware), or an object that behaves like one
    of these (a wrapper forwarding attributes with ``__getattr__``): it is refused
    with the name of the first missing method.
    """
    if isinstance(obj, MultiAgentEnv):
        return obj
    if isinstance(obj, ParallelEnv):
        return ParallelEnvAdapter(obj)
    if isinstance(obj, AECEnv):
        return AECEnvAdapter(obj)
    if isinstance(obj, gymnasium.Env):
        return TupleMultiAgentAdapter(obj) if is_multi_agent_tuple_env(obj) else GymnasiumAdapter(obj)
    return _wrap_duck_typed(obj)


# What marl calls on each kind of env: a duck-typed object must have all of them.
_PARALLEL_NEEDS = ("possible_agents", "reset", "step", "observation_space", "action_space")
_AEC_NEEDS = _PARALLEL_NEEDS + ("observe", "last")
_GYM_NEEDS = ("reset", "step", "observation_space", "action_space")


def _has(obj: Any, name: str) -> bool:
    try:
        getattr(obj, name)
    except Exception:  # a forwarding __getattr__ may raise anything for a missing name
        return False
    return True


def _wrap_duck_typed(obj: Any) -> MultiAgentEnv:
    """An object that is not a PettingZoo/Gymnasium instance but behaves like one."""
    what = f"an object of type {type(obj).__module__}.{type(obj).__qualname__}"
    if _has(obj, "possible_agents"):
        aec = _has(obj, "observe") or _has(obj, "agent_selection") or _has(obj, "last")
        kind, needs = ("a PettingZoo AEC env", _AEC_NEEDS) if aec else ("a PettingZoo Parallel env", _PARALLEL_NEEDS)
        missing = [n for n in needs if not _has(obj, n)]
        if missing:
            raise EnvError(f"cannot use {what} as an env: it looks like {kind} but has no {missing[0]!r} method")
        return AECEnvAdapter(obj) if aec else ParallelEnvAdapter(obj)
    if any(_has(obj, n) for n in _GYM_NEEDS):
        missing = [n for n in _GYM_NEEDS if not _has(obj, n)]
        if missing:
            raise EnvError(
                f"cannot use {what} as an env: it has no {missing[0]!r} (a multi-agent env needs "
                f"'possible_agents' and {list(_PARALLEL_NEEDS[1:])}; a Gymnasium env {list(_GYM_NEEDS)})"
            )
        return TupleMultiAgentAdapter(obj) if is_multi_agent_tuple_env(obj) else GymnasiumAdapter(obj)
    raise EnvError(
        f"cannot use {what} as an env; expected a marl MultiAgentEnv, a PettingZoo ParallelEnv or AECEnv, "
        "a gymnasium.Env, or an object with their methods (possible_agents, reset, step, observation_space, "
        "action_space; AEC also observe, last)"
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


def make_env(name: str, env_config: dict[str, Any] | None = None, wrappers: list | None = None) -> MultiAgentEnv:
    """Create the env called ``name`` with ``env_config``.

    Resolution order: a :func:`register_env` name; ``vmas.<scenario>`` (a VMAS
    scenario, see :mod:`marl.envs.vmas`); ``copies.<Gymnasium id>`` (``num_agents`` independent copies
    as one env, RLlib's ``make_multi_agent``, see :mod:`marl.envs.copies`); ``openspiel.<game>`` (an OpenSpiel game, its
    parameters in ``env_config``, see :mod:`marl.envs.openspiel`); ``mamujoco.<Scenario>_<agent_conf>`` (a
    multi-agent MuJoCo task, see :mod:`marl.envs.mamujoco`); ``jaxmarl.<env id>`` (one world of
    :class:`marl.envs.jaxmarl.JaxMarlEnv` through :func:`single_world`); a
    :func:`register_batched_env` name (one world of it, through :func:`single_world`: what the config
    checks probe and what the dict path steps); a PettingZoo-style module
    path (``mpe2.simple_spread_v3``: its ``parallel_env`` is preferred over
    ``env`` unless ``env_config["env_api"]`` is ``"parallel"`` or ``"aec"``;
    either may also return a marl ``MultiAgentEnv``, used as it is);
    a Gymnasium id (``CartPole-v1``, or ``module:Id`` such as
    ``lbforaging:Foraging-8x8-2p-2f-v3`` to import the registering module first;
    passed ``env_config`` as ``make`` kwargs).
    ``wrappers`` (``environment.wrappers``) are SuperSuit wrappers applied to the
    made object before it is adapted (see :mod:`marl.envs.wrappers`).
    Raises :class:`EnvError` if nothing resolves or ``env_config`` is rejected.
    """
    config = dict(env_config or {})
    tried: list[str] = []

    creator = _REGISTRY.get(name)
    if creator is not None:
        made = _wrapped(_call(name, creator, config), wrappers, name)
        try:
            return wrap_env(made)
        except EnvError as e:
            raise EnvError(
                f"creator registered for env {name!r} returned an unusable object: {e}"
            ) from None
    tried.append("register_env: no env registered under that name")

    if is_registered_batched(name):  # a user's own batched simulator: its world 0 answers the dict API's questions
        _no_wrappers(name, wrappers, "batched envs")
        return single_world(make_batched_env(name, config, num_worlds=1, seed=0, device="cpu"))

    if name.startswith("vmas."):
        _no_wrappers(name, wrappers, "VMAS scenarios")
        return make_vmas_env(name, config)

    if name.startswith(COPIES_PREFIX):
        _no_wrappers(name, wrappers, "copies.* envs")
        return make_copies_env(name, config)

    if name.startswith("jaxmarl."):
        _no_wrappers(name, wrappers, "JaxMARL envs")
        return single_world(JaxMarlEnv(name, config, num_worlds=1, seed=0))

    if name.startswith("openspiel."):
        _no_wrappers(name, wrappers, "OpenSpiel games")
        return make_openspiel_env(name, config)

    if is_mamujoco(name):
        _no_wrappers(name, wrappers, "MaMuJoCo tasks")
        return wrap_env(make_mamujoco_env(name, config))

    env = _try_module(name, config, tried, wrappers)
    if env is not None:
        return env

    env = _try_gymnasium(name, config, tried, wrappers)
    if env is not None:
        return env

    raise EnvError(
        f"unknown env {name!r}: tried {'; '.join(tried)}. "
        f"Registered envs: {registered_envs() or 'none'}{_suggestions(name)}"
    )


def _no_wrappers(name: str, wrappers: list | str | None, kind: str) -> None:
    """Families marl makes itself take no SuperSuit wrappers: a list given is one EnvError line (auto: none)."""
    if wrappers and not is_auto(wrappers):
        raise EnvError(f"env {name!r}: 'environment.wrappers' (SuperSuit) do not apply to {kind}")


def _wrapped(made: Any, wrappers: list | None, name: str) -> Any:
    """``made`` with the scenario's SuperSuit wrappers applied (none: unchanged; auto: its image defaults)."""
    if not wrappers or (is_auto(wrappers) and (isinstance(made, MultiAgentEnv) or not image_wrappers(made))):
        return made
    if isinstance(made, MultiAgentEnv):
        raise EnvError(
            f"env {name!r} is a marl MultiAgentEnv; 'environment.wrappers' (SuperSuit) wrap PettingZoo "
            "or Gymnasium envs only"
        )
    return apply_wrappers(made, wrappers, name)


def auto_wrappers_of(env: MultiAgentEnv) -> list:
    """What `auto` wraps the env's object with (``marl.envs.wrappers.image_wrappers``), given the env made
    without wrappers; marl's own envs and Tuple envs: none (SuperSuit wraps neither)."""
    raw = env.env if isinstance(env, (ParallelEnvAdapter, AECEnvAdapter, GymnasiumAdapter)) else None
    return image_wrappers(raw) if raw is not None else []


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


def _try_module(name: str, config: dict[str, Any], tried: list[str], wrappers: list | None = None) -> MultiAgentEnv | None:
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
        tried.append(f"PettingZoo module: import failed ({type(e).__name__}: {e}{_sibling_hint(name, e)})")
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
        made = _wrapped(_call(name, module.parallel_env, **config), wrappers, name)
        # A module may also hand out a marl MultiAgentEnv directly (one written against the protocol).
        return made if isinstance(made, MultiAgentEnv) else ParallelEnvAdapter(made)
    if api == "aec" or (api is None and has_aec):
        if not has_aec:
            raise EnvError(f"env {name!r}: env_api='aec' but module {name} has no env()")
        made = _wrapped(_call(name, module.env, **config), wrappers, name)
        return made if isinstance(made, MultiAgentEnv) else AECEnvAdapter(made)
    tried.append(f"PettingZoo module: {name} imported but has neither parallel_env() nor env()")
    return None


def _sibling_hint(name: str, error: Exception) -> str:
    """Where the module itself is missing from a package that imports (a version suffix from another release:
    `pettingzoo.sisl.pursuit_v4` where PettingZoo ships `pursuit_v5`): the package's env modules, the closest named."""
    parent, _, last = name.rpartition(".")
    if not parent or not isinstance(error, ModuleNotFoundError) or error.name != name:
        return ""  # (a dependency of the module missing, or no package above it: the error says enough)
    try:
        package = importlib.import_module(parent)
    except Exception:
        return ""
    names = sorted(m.name for m in pkgutil.iter_modules(getattr(package, "__path__", [])) if not m.name.startswith("_"))
    names = [n for n in names if re.search(r"_v\d+$", n)] or names  # PettingZoo's env modules carry a version
    if not names:
        return ""
    close = difflib.get_close_matches(last, names, n=1, cutoff=0.6)
    return (f"; did you mean {parent}.{close[0]}?" if close else ";") + f" {parent} has: {', '.join(names)}"


def _try_gymnasium(name: str, config: dict[str, Any], tried: list[str], wrappers: list | None = None) -> MultiAgentEnv | None:
    """Resolve ``name`` as a Gymnasium id, or record why not."""
    if ":" in name:
        # "module:EnvId" form: gymnasium imports the module, which registers the id.
        try:
            env = _call(name, gymnasium.make, name, **config)
        except (ImportError, gymnasium.error.Error) as e:
            tried.append(f"Gymnasium id: {type(e).__name__}: {e}")
            return None
    elif name not in gymnasium.envs.registry:
        tried.append("Gymnasium id: not in gymnasium.envs.registry")
        return None
    else:
        env = _call(name, gymnasium.make, name, **config)
    env = _wrapped(env, wrappers, name)
    # One agent, or one per Tuple entry (lbforaging, rware): chosen from the env's spaces.
    return TupleMultiAgentAdapter(env) if is_multi_agent_tuple_env(env) else GymnasiumAdapter(env)


def _suggestions(name: str) -> str:
    """A "did you mean" tail from registered names and Gymnasium ids, if any are close."""
    candidates = list(_REGISTRY) + list(gymnasium.envs.registry)
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.75)
    return f". Did you mean: {', '.join(close)}?" if close else ""


def registered_creator(name: str) -> EnvCreator | None:
    """The creator registered under ``name``, or None (used to ship it to runner processes)."""
    return _REGISTRY.get(name)
