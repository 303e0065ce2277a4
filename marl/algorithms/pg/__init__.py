"""PG: REINFORCE with discounted returns-to-go, one gradient step per train batch of whole episodes."""

from marl.algorithms.pg.config import PGConfig

__all__ = ["PGConfig"]
