"""Algorithms are found, not listed: a folder is an algorithm when its package exposes one.

    marl/algorithms/a2c/__init__.py:    from marl.algorithms.a2c.config import A2CConfig

Every package under `marl/algorithms/` is imported once, on first use; each
`AlgorithmConfig` subclass it exposes that is defined inside that folder and
names itself (`algo_name`, upper case; `"?"` marks a shared base such as
`MixingConfig`) is one algorithm. Its config class carries everything else: the
training section (defaults, `marl defaults NAME`; reference, `marl reference
NAME`), the module, the loss parts, the default workflow, and its `capabilities`
(`marl.config.capabilities`: action spaces, recurrent, overlap, whether a MIXED run
can train a policy with it, ...). So `algo: NAME`, `marl train --algo
NAME`, `from marl import NAMEConfig` and MIXED pick up a new folder with no table
to edit.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Iterator, Mapping

from marl.errors import ConfigError
from marl.import_paths import import_object

ALGORITHMS_PACKAGE = "marl.algorithms"  # its sub-packages are the algorithms
ABSTRACT = "?"  # the algo_name of a config class that is a base for others, not an algorithm


class NamedConfig:
    """What the registry finds: a config class naming its algorithm (`AlgorithmConfig` derives from it, so
    finding algorithms does not import the builder, which imports the runtime it builds)."""

    algo_name = ABSTRACT  # `algo:` in scenarios, upper case; ABSTRACT: a shared base, not an algorithm


@functools.cache
def discovered() -> dict[str, type]:
    """algo name -> config class of every algorithm folder, sorted by name."""
    package = importlib.import_module(ALGORITHMS_PACKAGE)  # found at call time: the folders sit above this layer

    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if not info.ispkg:
            continue
        folder = importlib.import_module(info.name)
        for value in vars(folder).values():
            if not (isinstance(value, type) and issubclass(value, NamedConfig)):
                continue
            inside = value.__module__ == info.name or value.__module__.startswith(info.name + ".")
            if not inside or value.__dict__.get("algo_name", ABSTRACT) == ABSTRACT:
                continue  # imported from another folder, or a shared base
            name = value.algo_name
            if name != name.upper():
                raise RuntimeError(f"{value.__module__}.{value.__qualname__}.algo_name must be upper case, got '{name}'")
            if name in found and found[name] is not value:
                other = found[name]
                raise RuntimeError(f"two algorithms are named '{name}': {other.__module__}.{other.__qualname__} and {value.__module__}.{value.__qualname__}")
            found[name] = value
    return dict(sorted(found.items()))


class _Discovered(Mapping):
    """A read-only view of `discovered()`: algorithms are added by adding a folder, not by editing this."""

    def __getitem__(self, name: str) -> type:
        return discovered()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(discovered())

    def __len__(self) -> int:
        return len(discovered())

    def __repr__(self) -> str:
        return f"ALGORITHMS({sorted(discovered())})"


ALGORITHMS: Mapping[str, type] = _Discovered()


def config_class(name: str):
    """The config class `algo:` names: a discovered algorithm's name, or an import path
    (`my_pkg.algos:MyConfig`) to an AlgorithmConfig subclass kept outside marl."""

    if ":" in str(name):
        return _imported_config_class(str(name))
    cls = discovered().get(str(name).upper())
    if cls is None:
        raise ConfigError(
            f"unknown algo '{name}'; available: {sorted(discovered())}, or an import path 'pkg.module:MyConfig'"
        )
    return cls


def _imported_config_class(path: str) -> type:
    try:
        cls = import_object(path)
    except (ImportError, AttributeError, ValueError) as err:
        raise ConfigError(f"algo '{path}' cannot be imported: {err}") from None
    if not (isinstance(cls, type) and issubclass(cls, NamedConfig)) or cls.__dict__.get("algo_name", ABSTRACT) == ABSTRACT:
        raise ConfigError(f"algo '{path}' is not an AlgorithmConfig subclass with an algo_name of its own")
    return cls


def algo_reference(cls: type) -> str:
    """What `algo:` says for a config class: its name when discovered, else its import path."""
    return cls.algo_name if discovered().get(cls.algo_name) is cls else f"{cls.__module__}:{cls.__qualname__}"


def config_classes() -> dict[str, type]:
    """Class name -> config class (`PPOConfig` -> PPOConfig): what `marl` and `marl.algorithms` export."""
    return {cls.__name__: cls for cls in discovered().values()}


def exporting_config_classes(module_name: str, static: list[str], module_globals: dict):
    """The PEP 562 `__getattr__` and `__dir__` of a package that exports every algorithm's config class
    (`marl`, `marl.algorithms`) besides its `static` names, found on first use."""

    def __getattr__(name: str):
        if name == "__all__":  # `from marl import *` brings every algorithm's config class too
            return sorted(static + list(config_classes()))
        cls = config_classes().get(name)
        if cls is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return cls

    def __dir__() -> list[str]:
        return sorted(set(module_globals) | set(config_classes()))

    return __getattr__, __dir__
