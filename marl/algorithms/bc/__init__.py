from marl.algorithms.bc.config import BCConfig

__all__ = ["BCConfig"]
