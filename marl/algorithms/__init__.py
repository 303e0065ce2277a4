"""Algorithms: the AlgorithmConfig builder, one folder per algorithm, the reference and episode recording.

The folders are found, not listed (`marl.config.registry`): each algorithm's
config class (`PPOConfig`, ...) is an attribute of this package, looked up on
first use (PEP 562).
"""

from marl.runtime.algorithm import Algorithm
from marl.algorithms.algorithm_config import AlgorithmConfig
from marl.checkpoint.deploy import load_connector_state, load_module
from marl.config.registry import ALGORITHMS, config_class, exporting_config_classes
from marl.config.compose import load_scenario
from marl.config.scenario import config_from_dict
from marl.errors import CheckpointError, ConfigError

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


# Every algorithm's config class (`marl.PPOConfig`, `from marl import A2CConfig`), found on first use (PEP 562).
__getattr__, __dir__ = exporting_config_classes(__name__, _STATIC, globals())
