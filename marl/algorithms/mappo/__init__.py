from marl.algorithms.mappo.config import MAPPOConfig

__all__ = ["MAPPOConfig"]
