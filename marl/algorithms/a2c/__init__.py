"""A2C: synchronous advantage actor-critic, one gradient step per train batch."""

from marl.algorithms.a2c.config import A2CConfig

__all__ = ["A2CConfig"]
