from marl.algorithms.vdn.config import VDNConfig

__all__ = ["VDNConfig"]
