from marl.algorithms.dqn.config import DQNConfig

__all__ = ["DQNConfig"]
