"""Learners: Learner (parameter groups, optimisers, losses, updates) and LearnerGroup."""

from marl.learners.group import LearnerGroup
from marl.learners.learner import Learner
from marl.learners.param_groups import Minibatching, ParamGroup, TargetCopy

__all__ = ["Learner", "LearnerGroup", "Minibatching", "ParamGroup", "TargetCopy"]
