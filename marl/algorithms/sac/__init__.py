from marl.algorithms.sac.config import SACConfig

__all__ = ["SACConfig"]
