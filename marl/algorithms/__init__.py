"""Algorithms: the AlgorithmConfig builder, Algorithm, and one folder per algorithm."""

from marl.algorithms.algorithm import Algorithm
from marl.algorithms.algorithm_config import AlgorithmConfig
from marl.algorithms.appo import APPOConfig
from marl.algorithms.dqn import DQNConfig
from marl.algorithms.impala import IMPALAConfig
from marl.algorithms.mappo import MAPPOConfig
from marl.algorithms.mixed import MixedConfig
from marl.algorithms.ppo import PPOConfig
from marl.algorithms.registry import ALGORITHMS, config_class
from marl.algorithms.scenario import config_from_dict, load_scenario
from marl.algorithms.sections import ConfigError

__all__ = ["ALGORITHMS", "APPOConfig", "Algorithm", "AlgorithmConfig", "ConfigError", "DQNConfig", "IMPALAConfig", "MAPPOConfig", "MixedConfig", "PPOConfig", "config_class", "config_from_dict", "load_scenario"]
