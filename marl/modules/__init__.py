"""Modules: RLModule, MultiRLModule, the default networks and action distributions."""

from marl.modules.central_critic import CentralCriticMLP
from marl.modules.distributions import Categorical, DiagGaussian, MultiCategorical, distribution_factory
from marl.modules.mlp import ActorCriticMLP
from marl.modules.q_mlp import QMLP
from marl.modules.build import build_module
from marl.modules.rl_module import MultiRLModule, RLModule

__all__ = [
    "ActorCriticMLP",
    "CentralCriticMLP",
    "Categorical",
    "DiagGaussian",
    "MultiCategorical",
    "MultiRLModule",
    "QMLP",
    "RLModule",
    "build_module",
    "distribution_factory",
]
