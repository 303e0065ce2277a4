from marl.algorithms.ppo.config import PPOConfig

__all__ = ["PPOConfig"]
