"""Connectors: env->module, module->env and learner pipelines."""

from marl.connectors.env_to_module import MeanStdFilter, ObservationPreprocessor
from marl.connectors.learner import compute_gae, reverse_scan, standardize, vtrace
from marl.connectors.module_to_env import ActionAdapter

__all__ = ["ActionAdapter", "MeanStdFilter", "ObservationPreprocessor", "compute_gae", "reverse_scan", "standardize", "vtrace"]
