"""marl: multi-agent reinforcement learning, declared as a dataflow graph of operators."""

from marl.algorithms import (
    Algorithm,
    AlgorithmConfig,
    APPOConfig,
    ConfigError,
    DQNConfig,
    IMPALAConfig,
    MAPPOConfig,
    MixedConfig,
    PPOConfig,
    load_scenario,
)
from marl.data import MultiAgentBatch, SampleBatch
from marl.envs import MultiAgentEnv, make_env, register_env
from marl.modules import MultiRLModule, RLModule
from marl.policies import PolicySpec
from marl.workflow import Workflow

__version__ = "0.1.0"

__all__ = [
    "APPOConfig",
    "Algorithm",
    "AlgorithmConfig",
    "ConfigError",
    "DQNConfig",
    "IMPALAConfig",
    "MAPPOConfig",
    "MixedConfig",
    "MultiAgentBatch",
    "MultiAgentEnv",
    "MultiRLModule",
    "PPOConfig",
    "PolicySpec",
    "RLModule",
    "SampleBatch",
    "Workflow",
    "load_scenario",
    "make_env",
    "register_env",
]
