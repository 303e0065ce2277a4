from marl.algorithms.mixed.config import MixedConfig

__all__ = ["MixedConfig"]
