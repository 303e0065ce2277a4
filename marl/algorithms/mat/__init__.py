from marl.algorithms.mat.config import MATConfig

__all__ = ["MATConfig"]
