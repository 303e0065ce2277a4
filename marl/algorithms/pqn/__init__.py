from marl.algorithms.pqn.config import PQNConfig

__all__ = ["PQNConfig"]
