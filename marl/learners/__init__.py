"""Learners: Learner (optimisers, losses, updates) and LearnerGroup."""

from marl.learners.group import LearnerGroup
from marl.learners.learner import Learner

__all__ = ["Learner", "LearnerGroup"]
