"""The config layer: the typed sections with their checks and the stop rule (`sections`), finding an algorithm's
config class by name (`registry`), scenario files in YAML (`scenario`) and what one policy needs of its algorithm
(`policy_plan.PolicyPlan`, the answer to `AlgorithmConfig.plan_for`). The builder every algorithm's
config derives from, `AlgorithmConfig`, sits with the algorithm folders: its `build()` makes the runtime."""

from marl.config.policy_plan import PolicyPlan
from marl.config.registry import ALGORITHMS, NamedConfig, config_class
from marl.config.compose import load_scenario
from marl.config.scenario import config_from_dict
from marl.config.sections import stop_reason
from marl.errors import ConfigError
from marl.config.plain_data import plain_data

__all__ = ["ALGORITHMS", "ConfigError", "NamedConfig", "PolicyPlan", "config_class", "config_from_dict", "load_scenario", "plain_data", "stop_reason"]
