from marl.algorithms.hasac.config import HASACConfig

__all__ = ["HASACConfig"]
