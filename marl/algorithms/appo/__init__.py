from marl.algorithms.appo.config import APPOConfig

__all__ = ["APPOConfig"]
