from marl.algorithms.hatrpo.config import HATRPOConfig

__all__ = ["HATRPOConfig"]
