from marl.algorithms.qmix.config import QMIXConfig

__all__ = ["QMIXConfig"]
