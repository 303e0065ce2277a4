from marl.algorithms.happo.config import HAPPOConfig

__all__ = ["HAPPOConfig"]
