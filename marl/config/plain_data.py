"""A config value as plain data: what config.yaml and a checkpoint's manifest hold.

Its own module because writing a config out is a job apart from checking one (`marl.config.checks`): the
config's `to_dict`, the run directory and the checkpoint manifest all call it.
"""

from __future__ import annotations

import dataclasses


def plain_data(value):
    """A config value as plain data (config.yaml, the checkpoint manifest): classes become their import paths,
    other callables their names."""
    if isinstance(value, dict):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, type):
        return f"{value.__module__}:{value.__qualname__}"
    if callable(value):
        return f"<callable {getattr(value, '__qualname__', repr(value))}>"
    if dataclasses.is_dataclass(value):
        return plain_data(dataclasses.asdict(value))
    return repr(value)
