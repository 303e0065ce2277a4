from marl.algorithms.impala.config import IMPALAConfig

__all__ = ["IMPALAConfig"]
