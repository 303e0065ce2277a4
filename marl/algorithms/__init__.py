"""Algorithms: the AlgorithmConfig builder, Algorithm, and one folder per algorithm."""

from marl.algorithms.algorithm import Algorithm
from marl.algorithms.algorithm_config import AlgorithmConfig
from marl.algorithms.checkpoint import CheckpointError, load_connector_state, load_module
from marl.algorithms.appo import APPOConfig
from marl.algorithms.dqn import DQNConfig
from marl.algorithms.impala import IMPALAConfig
from marl.algorithms.mappo import MAPPOConfig
from marl.algorithms.mixed import MixedConfig
from marl.algorithms.ppo import PPOConfig
from marl.algorithms.qmix import QMIXConfig
from marl.algorithms.vdn import VDNConfig
from marl.algorithms.registry import ALGORITHMS, config_class
from marl.algorithms.scenario import config_from_dict, load_scenario
from marl.algorithms.sections import ConfigError

__all__ = [
    "ALGORITHMS",
    "APPOConfig",
    "Algorithm",
    "AlgorithmConfig",
    "CheckpointError",
    "ConfigError",
    "DQNConfig",
    "IMPALAConfig",
    "MAPPOConfig",
    "MixedConfig",
    "PPOConfig",
    "QMIXConfig",
    "VDNConfig",
    "config_class",
    "config_from_dict",
    "load_connector_state",
    "load_module",
    "load_scenario",
]
