from marl.algorithms.maddpg.config import MADDPGConfig

__all__ = ["MADDPGConfig"]
