from marl.algorithms.masac.config import MASACConfig

__all__ = ["MASACConfig"]
