"""SuperSuit wrappers named in a scenario: `environment.wrappers`.

A scenario lists them in the order they wrap the raw env (innermost first):

    environment:
      env: pettingzoo.butterfly.pistonball_v6
      wrappers:
        - color_reduction_v0: {mode: B}
        - resize_v1: {x_size: 32, y_size: 32}
        - frame_stack_v1: {stack_size: 3}
        - flatten_v0          # a wrapper without arguments may be a bare name

Each name is a SuperSuit env wrapper (`supersuit.<name>(env, **args)`); they are applied
to the PettingZoo (or Gymnasium) object before marl adapts it, so downscaling and colour
reduction are SuperSuit's, not marl's own. Names and arguments are checked when the
config is validated, before any env is made: an unknown name or argument is one line.

The default, `auto` (`image_wrappers`): an env whose observations are large images (uint8 frames, HWC,
with a side over LARGE_SIDE = 84 px, RLlib's old `model.dim`) is resized by SuperSuit's `resize_v1` to
IMAGE_SIDE x IMAGE_SIDE = 42 x 42, colour and uint8 kept; any other env gets no wrapper. The default modules
size their conv stack to the resized frame (`marl.modules.catalog.default_conv_filters`). Pistonball's
457x120 RGB crops, full size, cost 283 s an iteration under PPO's defaults; resized, seconds
(benchmarks/speed/images.py). A list given (even []) replaces `auto` whole: grey frames, another size, none. Frame
stacking is the `frame_stack` connector's (`connectors.env_to_module`). The config resolves `auto` when it
builds, so a run's config.yaml names the wrappers it ran with.
"""

from __future__ import annotations

import difflib
import inspect
import re
from typing import Any

import numpy as np

from marl.errors import ConfigError

# SuperSuit constructors that turn an env into a *vector* env (SB3/gym vectorisation):
# marl's runners vectorise themselves, so these do not wrap an env marl can use.
_VECTOR_CONSTRUCTORS = {
    "concat_vec_envs_v1",
    "gym_vec_env_v0",
    "pettingzoo_env_to_vec_env_v1",
    "stable_baselines3_vec_env_v0",
    "stable_baselines_vec_env_v0",
    "vectorize_aec_env_v0",
}
_VERSIONED = re.compile(r"_v\d+$")
KEY = "environment.wrappers"
AUTO = "auto"  # the default: the image wrappers below for an env of large image observations, else none
LARGE_SIDE = 84  # frames with a side over this are resized (RLlib's old model.dim)
IMAGE_SIDE = 42  # ... to IMAGE_SIDE x IMAGE_SIDE: conv stack [[16, 4, 2], [32, 4, 2], [32, 3, 1]]


def is_auto(spec: Any) -> bool:
    return isinstance(spec, str) and spec == AUTO


def is_large_frame(space: Any) -> bool:
    """A uint8 Box of HWC frames (1-4 channels last) with a side over LARGE_SIDE (or an array of such a frame)."""
    shape = getattr(space, "shape", None)
    if getattr(space, "dtype", None) != np.uint8 or shape is None or len(shape) != 3 or not 1 <= shape[2] <= 4:
        return False
    return max(shape[0], shape[1]) > LARGE_SIDE


def image_wrappers(made: Any) -> list:
    """What `auto` wraps `made` (a PettingZoo or Gymnasium object, before marl adapts it) with: the resize to
    IMAGE_SIDE where an agent observes large frames, else nothing (marl's own envs: nothing)."""
    agents = getattr(made, "possible_agents", None)
    if agents is not None and callable(getattr(made, "observation_space", None)):  # PettingZoo: per agent
        spaces = [made.observation_space(a) for a in agents]
    else:
        spaces = [getattr(made, "observation_space", None)]
    if any(is_large_frame(s) for s in spaces):
        return [{"resize_v1": {"x_size": IMAGE_SIDE, "y_size": IMAGE_SIDE}}]
    return []


def _supersuit():
    try:
        import supersuit
    except ImportError as err:
        raise ConfigError(
            f"'{KEY}' names SuperSuit wrappers, but supersuit is not installed ({err}); "
            "install it with: pip install 'marl[butterfly]' (or pip install supersuit)"
        ) from None
    return supersuit


def available_wrappers() -> list[str]:
    """The SuperSuit wrappers `environment.wrappers` accepts."""
    ss = _supersuit()
    return sorted(
        n for n in dir(ss)
        if _VERSIONED.search(n) and n not in _VECTOR_CONSTRUCTORS and callable(getattr(ss, n, None))
    )


def parse_wrappers(spec: Any) -> list[tuple[str, dict]]:
    """[(name, kwargs)] from the scenario's list; raises ConfigError naming the bad entry."""
    if spec is None or is_auto(spec):  # (auto: the image defaults, known once the env is made)
        return []
    if not isinstance(spec, (list, tuple)):
        raise ConfigError(
            f"'{KEY}' must be a list of SuperSuit wrappers (or auto), e.g. [{{resize_v1: {{x_size: 32, y_size: 32}}}}], "
            f"got {type(spec).__name__}"
        )
    if not spec:
        return []
    ss = _supersuit()
    known = available_wrappers()
    out = []
    for i, item in enumerate(spec):
        where = f"{KEY}[{i}]"
        if isinstance(item, str):
            name, kwargs = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            name, kwargs = next(iter(item.items()))
            kwargs = {} if kwargs is None else kwargs
        else:
            raise ConfigError(
                f"'{where}' must be a wrapper name or a one-key mapping {{name: {{arg: value}}}}, got {item!r}"
            )
        if name not in known:
            near = difflib.get_close_matches(str(name), known, n=2, cutoff=0.6)
            hint = f" (did you mean {' or '.join(near)}?)" if near else ""
            raise ConfigError(f"'{where}': unknown SuperSuit wrapper {name!r}{hint}; available: {', '.join(known)}")
        if not isinstance(kwargs, dict):
            raise ConfigError(f"'{where}.{name}' takes a mapping of arguments, got {kwargs!r}")
        fn = getattr(ss, name)
        try:
            inspect.signature(fn).bind(None, **kwargs)
        except TypeError as err:
            params = [p for p in inspect.signature(fn).parameters if p != "env"]
            raise ConfigError(f"'{where}.{name}': {err}; its arguments are {params}") from None
        out.append((name, dict(kwargs)))
    return out


def apply_wrappers(env: Any, spec: Any, env_name: str = "?") -> Any:
    """`env` wrapped by each SuperSuit wrapper of `spec` (auto: `image_wrappers(env)`), innermost first."""
    wrappers = parse_wrappers(image_wrappers(env) if is_auto(spec) else spec)
    if not wrappers:
        return env
    ss = _supersuit()
    for i, (name, kwargs) in enumerate(wrappers):
        try:
            env = getattr(ss, name)(env, **kwargs)
        except Exception as err:  # SuperSuit asserts on bad values (e.g. colour mode) and unsuited spaces
            raise ConfigError(
                f"'{KEY}[{i}].{name}' {kwargs} could not wrap env {env_name!r}: {type(err).__name__}: {err}"
            ) from None
    return env
