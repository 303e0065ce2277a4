"""marl: multi-agent reinforcement learning, declared as a dataflow graph of operators."""

from marl.algorithms import (
    Algorithm,
    AlgorithmConfig,
    APPOConfig,
    CheckpointError,
    ConfigError,
    DQNConfig,
    IMPALAConfig,
    MAPPOConfig,
    MixedConfig,
    PPOConfig,
    QMIXConfig,
    VDNConfig,
    load_module,
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
    "CheckpointError",
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
    "QMIXConfig",
    "RLModule",
    "SampleBatch",
    "VDNConfig",
    "Workflow",
    "load_module",
    "load_scenario",
    "make_env",
    "register_env",
]
