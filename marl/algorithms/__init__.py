"""Algorithms: the AlgorithmConfig builder, Algorithm, and one folder per algorithm.

The folders are found, not listed (`marl.algorithms.registry`): each algorithm's
config class (`PPOConfig`, ...) is an attribute of this package, looked up on
first use (PEP 562).
"""

from marl.algorithms.algorithm import Algorithm
from marl.algorithms.algorithm_config import AlgorithmConfig
from marl.algorithms.checkpoint import CheckpointError, load_connector_state, load_module
from marl.algorithms.registry import ALGORITHMS, config_class, config_classes
from marl.algorithms.scenario import config_from_dict, load_scenario
from marl.algorithms.sections import ConfigError

_STATIC = [
    "ALGORITHMS",
    "Algorithm",
    "AlgorithmConfig",
    "CheckpointError",
    "ConfigError",
    "config_class",
    "config_from_dict",
    "load_connector_state",
    "load_module",
    "load_scenario",
]


def __getattr__(name: str):
    if name == "__all__":  # `from marl.algorithms import *` brings every algorithm's config class too
        return sorted(_STATIC + list(config_classes()))
    cls = config_classes().get(name)
    if cls is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return cls


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(config_classes()))
