"""What a config key may be, and the one place a key/value is checked against it.

A section field's `doc(...)` carries its reference text and its checks; `update_section` checks a
key/value: unknown key (with the nearest valid one), wrong type, value out of range; `check_relations`
checks what a key must be against another key of its section, once the whole config is set
(`AlgorithmConfig.validate`). Its own module because checking is one job for every section, the ones
shared by every algorithm (`marl.config.sections`) and each algorithm's own training section alike.

The checks a `doc(...)` may carry:

    min=, max=        bounds of a number (inclusive)
    choices=(...)     the allowed values
    check=fn          fn(value) -> None, or the reason the value is wrong (a schedule's entries, say)
    at_most="key"     not larger than the section's `key` (minibatch_size <= train_batch_size) when
                      the user set it to a value other than its default; a default larger than the user's `key` is left to the consumer
                      to cap (a default minibatch of 64 rows with train_batch_size 32: the whole batch)
    auto=True         the key may also hold AUTO ("auto"): a value the algorithm picks when it builds (PPO: by the
                      env's action space, `marl.algorithms.ppo.action_space_defaults`); the other checks judge the rest

`device_problem`, `schedule_of_probabilities` and `schedule_of_factors` are `check=` functions more than one section uses.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import field
from typing import Any

import torch

from marl.errors import ConfigError


CHECKS = frozenset({"min", "max", "choices", "check", "at_most", "auto"})
AUTO = "auto"  # the value of an `auto=True` key that the algorithm resolves when it builds


def doc(text: str, default=dataclasses.MISSING, default_factory=dataclasses.MISSING, **checks):
    unknown = sorted(set(checks) - CHECKS)
    if unknown:  # a typo here would silently drop a check
        raise TypeError(f"doc(): unknown check(s) {unknown}; known: {sorted(CHECKS)}")
    meta = {"doc": text, **checks}
    if default_factory is not dataclasses.MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def device_problem(value: str) -> str | None:
    """Why `value` is not a torch device this machine has (None: it is)."""

    try:
        device = torch.device(value)
    except (RuntimeError, TypeError):
        return "must be a torch device such as cpu, cuda or cuda:1"
    if device.type == "cuda" and not torch.cuda.is_available():
        return "names a CUDA device, but torch sees no GPU here (use cpu)"
    if device.type not in ("cpu", "cuda"):
        return "must be cpu or a CUDA device"
    return None


def section_fields(section) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(section)}


def _type_ok(value, hint) -> tuple[bool, Any]:
    """Checks (and gently coerces, e.g. int -> float) a value against a simple type hint."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return True, value
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        if value is None and type(None) in args:
            return True, None
        for arg in args:
            if arg is type(None):
                continue
            ok, coerced = _type_ok(value, arg)
            if ok:
                return True, coerced
        return False, value
    if hint is bool:
        return isinstance(value, bool), value
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        return False, value
    if hint is str:
        return isinstance(value, str), value
    if hint is dict or origin is dict:
        return isinstance(value, typing.Mapping), (dict(value) if isinstance(value, typing.Mapping) else value)
    if hint is list or origin is list:
        if isinstance(value, (list, tuple)):
            return True, list(value)
        return False, value
    return True, value


def _type_name(hint) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def update_section(section, section_name: str, values: dict) -> None:
    """Sets `values` on a section dataclass, naming any bad key or value; all or nothing."""
    fields = section_fields(section)
    hints = typing.get_type_hints(type(section))
    checked = {}
    for key, value in values.items():
        if key not in fields:
            near = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise ConfigError(
                f"unknown key '{section_name}.{key}'{hint}; valid keys of '{section_name}': {sorted(fields)}",
                key=f"{section_name}.{key}",
            )
        if isinstance(value, str) and value == AUTO and fields[key].metadata.get("auto"):
            checked[key] = AUTO
            continue
        ok, coerced = _type_ok(value, hints[key])
        if not ok:
            raise ConfigError(
                f"'{section_name}.{key}' must be {_type_name(hints[key])}, got {type(value).__name__} {value!r}",
                key=f"{section_name}.{key}",
            )
        meta = fields[key].metadata
        if coerced is not None:
            if "min" in meta and coerced < meta["min"]:
                raise ConfigError(f"'{section_name}.{key}' must be >= {meta['min']}, got {coerced!r}", key=f"{section_name}.{key}")
            if "max" in meta and coerced > meta["max"]:
                raise ConfigError(f"'{section_name}.{key}' must be <= {meta['max']}, got {coerced!r}", key=f"{section_name}.{key}")
            if "choices" in meta and coerced not in meta["choices"]:
                raise ConfigError(f"'{section_name}.{key}' must be one of {list(meta['choices'])}, got {coerced!r}", key=f"{section_name}.{key}")
            if "check" in meta:
                reason = meta["check"](coerced)
                if reason:
                    raise ConfigError(f"'{section_name}.{key}' {reason}, got {coerced!r}", key=f"{section_name}.{key}")
        checked[key] = coerced
    for key, value in checked.items():
        setattr(section, key, value)
    # The keys the user gave a value other than the default (a scenario file is merged over every default),
    # for `check_relations`.
    given = {key for key, value in checked.items() if value != _default(fields[key])}
    object.__setattr__(section, "_user_keys", set(getattr(section, "_user_keys", ())) | given)


def _default(f: dataclasses.Field):
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def check_relations(section, section_name: str) -> None:
    """The checks between keys of one section (`at_most`), on its current values, for the keys the user set."""
    user_keys = getattr(section, "_user_keys", set())
    for name, f in section_fields(section).items():
        other = f.metadata.get("at_most")
        if other is None or name not in user_keys:
            continue
        value, limit = getattr(section, name), getattr(section, other)
        if AUTO in (value, limit):  # resolved when the algorithm builds; the resolved defaults fit each other
            continue
        if value is not None and limit is not None and value > limit:
            raise ConfigError(
                f"'{section_name}.{name}' ({value}) must be <= '{section_name}.{other}' ({limit})", key=f"{section_name}.{name}"
            )


def _schedule(value, high: float | None, what: str) -> str | None:
    """Why `value` is not a schedule [[env_step, v], ...] with steps >= 0 increasing and 0 <= v (<= high)."""
    last = -1
    for point in value:
        if not isinstance(point, (list, tuple)) or len(point) != 2:
            return "must be a list of [env_step, value] pairs"
        step, v = point
        if not isinstance(step, (int, float)) or isinstance(step, bool) or step < 0 or step < last:
            return "must have env steps >= 0 in increasing order"
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or (high is not None and v > high):
            return f"must have values {what}"
        last = step
    if not value:
        return "must have at least one [env_step, value] pair"
    return None


def schedule_of_probabilities(value) -> str | None:
    """`check=` of a schedule [[step, probability], ...]: steps >= 0 and increasing, probabilities in [0, 1]."""
    return _schedule(value, 1.0, "in [0, 1] (probabilities)")


def schedule_of_factors(value) -> str | None:
    """`check=` of a schedule [[step, factor], ...]: steps >= 0 and increasing, factors >= 0."""
    return _schedule(value, None, ">= 0 (factors)")
