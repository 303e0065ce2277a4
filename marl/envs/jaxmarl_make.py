"""Making a JaxMARL env from its marl name (`jaxmarl.<env id>`): the import, the JAX device matching torch's,
JaxMARL's spaces as Gymnasium's, and the env's kwargs checked (an unknown id or key is one clear line).

`marl.envs.jaxmarl.JaxMarlEnv` steps what `make_jaxmarl` makes.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import os
from typing import Any

import gymnasium
import numpy as np
import torch

from marl.envs.base import EnvError

PREFIX = "jaxmarl."


def import_jaxmarl():
    if importlib.util.find_spec("jaxmarl") is None:
        raise EnvError("JaxMARL envs need the jaxmarl package: pip install 'marl[jaxmarl]'")
    # On a GPU, JAX would take 75% of its memory at start-up; torch (the policy, the learner) shares the device in
    # this process, so JAX allocates as it goes unless the user set otherwise.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jaxmarl

    return jax, jaxmarl


def jax_device(jax, name: str, device) -> Any:
    """The JAX device matching torch `device` (cpu, cuda, cuda:i), or one EnvError line saying what JAX here has."""
    device = torch.device("cpu" if device is None else device)
    platform = {"cpu": "cpu", "cuda": "gpu"}.get(device.type)
    try:
        devices = jax.devices(platform) if platform else []
    except RuntimeError:
        devices = []
    index = device.index or 0
    if index >= len(devices):
        raise EnvError(f"env {name!r}: env_runners.device {str(device)!r} needs a JAX {platform or device.type} device "
                       f"{index}, but JAX here has {[str(d) for d in jax.devices()]} (for CUDA: pip install 'jax[cuda13]')")
    return devices[index]


def to_gymnasium(space) -> gymnasium.Space:
    """A JaxMARL space (its own Box/Discrete/MultiDiscrete classes) as Gymnasium's."""
    kind = type(space).__name__
    if kind == "Discrete":
        return gymnasium.spaces.Discrete(int(space.n))
    if kind == "MultiDiscrete":
        return gymnasium.spaces.MultiDiscrete(np.asarray(space.num_categories))
    if kind == "Box":
        shape = tuple(int(d) for d in np.atleast_1d(space.shape))  # (Hanabi's Box gives its shape as one int)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return gymnasium.spaces.Box(low, high, shape, np.float32)
    raise EnvError(f"JaxMARL space {space} ({kind}) has no Gymnasium equivalent marl knows")


def make_jaxmarl(name: str, env_config: dict[str, Any]):
    """The JaxMARL env for `jaxmarl.<env id>` and its kwargs; an unknown id or kwarg is one clear line."""
    _, jaxmarl = import_jaxmarl()
    env_id = name[len(PREFIX):]
    known = list(jaxmarl.registered_envs)
    if env_id not in known:
        near = difflib.get_close_matches(env_id, known, n=2)
        hint = f" (did you mean {' or '.join(PREFIX + n for n in near)}?)" if near else ""
        raise EnvError(f"unknown JaxMARL env {name!r}{hint}; JaxMARL has: {', '.join(known)}")
    config = dict(env_config)
    if isinstance(config.get("scenario"), str):  # SMAX maps by name: {scenario: 3m}
        from jaxmarl.environments.smax import map_name_to_scenario

        try:
            config["scenario"] = map_name_to_scenario(config["scenario"])
        except KeyError:
            raise EnvError(f"env {name!r}: unknown SMAX scenario {config['scenario']!r} (environment.env_config.scenario)") from None
    try:
        env = jaxmarl.make(env_id, **config)
    except TypeError as err:
        bad = [k for k in config if f"'{k}'" in str(err)]
        what = f"env_config key(s) {bad}" if bad else "its env_config"
        raise EnvError(f"env {name!r} rejected {what}: {err}") from None
    except (ImportError, ValueError) as err:  # JaxMARL's own line for a missing optional package (brax, jaxrobotarium)
        raise EnvError(f"env {name!r}: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    known_keys = _constructor_keys(env)
    unknown = [k for k in config if k not in known_keys]
    if unknown:  # JaxMARL constructors take **kwargs and drop what they do not know: a typo would go unseen
        raise EnvError(f"env {name!r}: env_config has keys the env does not take ({', '.join(unknown)}); "
                       f"it takes: {', '.join(sorted(known_keys))}")
    return env


def _constructor_keys(env) -> set[str]:
    """Named parameters of the constructors an env's kwargs reach (its classes', and a wrapped `_env`'s: SMAX's enemies)."""
    keys = set()
    for obj in (env, getattr(env, "_env", None)):
        for cls in type(obj).__mro__ if obj is not None else ():
            if cls is not object and "__init__" in vars(cls):
                keys.update(p.name for p in inspect.signature(cls.__init__).parameters.values()
                            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
    return keys
