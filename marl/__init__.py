"""marl: multi-agent reinforcement learning, declared as a dataflow graph of operators."""

from marl.algorithms import Algorithm, AlgorithmConfig, CheckpointError, ConfigError, load_module, load_scenario
from marl.checkpoint.deploy import load_policy
from marl.config.registry import exporting_config_classes
from marl.data import MultiAgentBatch, SampleBatch
from marl.envs import BatchedEnv, MultiAgentEnv, make_env, register_batched_env, register_env
from marl.modules import MultiRLModule, RLModule
from marl.policies import PolicySpec
from marl.workflow import Workflow

__version__ = "0.1.0"

_STATIC = [
    "Algorithm",
    "AlgorithmConfig",
    "BatchedEnv",
    "CheckpointError",
    "ConfigError",
    "MultiAgentBatch",
    "MultiAgentEnv",
    "MultiRLModule",
    "PolicySpec",
    "RLModule",
    "SampleBatch",
    "Workflow",
    "load_module",
    "load_policy",
    "load_scenario",
    "make_env",
    "register_batched_env",
    "register_env",
]


# Every algorithm's config class (`marl.PPOConfig`, `from marl import A2CConfig`), found on first use (PEP 562).
__getattr__, __dir__ = exporting_config_classes(__name__, _STATIC, globals())
