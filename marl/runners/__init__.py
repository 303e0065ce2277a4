"""Runners: EnvRunner (vectorised envs, batched inference per policy) and the group of them."""

from marl.runners.env_runner import EnvRunner
from marl.runners.group import EnvRunnerGroup, RunnerFailedError

__all__ = ["EnvRunner", "EnvRunnerGroup", "RunnerFailedError"]
