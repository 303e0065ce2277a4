"""marl: multi-agent reinforcement learning, declared as a dataflow graph of operators."""

from marl.algorithms import Algorithm, AlgorithmConfig, CheckpointError, ConfigError, load_module, load_scenario
from marl.data import MultiAgentBatch, SampleBatch
from marl.envs import MultiAgentEnv, make_env, register_env
from marl.modules import MultiRLModule, RLModule
from marl.policies import PolicySpec
from marl.workflow import Workflow

__version__ = "0.1.0"

_STATIC = [
    "Algorithm",
    "AlgorithmConfig",
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
    "load_scenario",
    "make_env",
    "register_env",
]


def __getattr__(name: str):
    """Every algorithm's config class (`marl.PPOConfig`, `from marl import A2CConfig`), found on first use (PEP 562)."""
    from marl.algorithms.registry import config_classes

    if name == "__all__":
        return sorted(_STATIC + list(config_classes()))
    cls = config_classes().get(name)
    if cls is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return cls


def __dir__() -> list[str]:
    from marl.algorithms.registry import config_classes

    return sorted(set(globals()) | set(config_classes()))
