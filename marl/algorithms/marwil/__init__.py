from marl.algorithms.marwil.config import MARWILConfig

__all__ = ["MARWILConfig"]
