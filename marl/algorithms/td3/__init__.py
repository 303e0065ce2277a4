from marl.algorithms.td3.config import TD3Config

__all__ = ["TD3Config"]
