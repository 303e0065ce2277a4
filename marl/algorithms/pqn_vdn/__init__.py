from marl.algorithms.pqn_vdn.config import PQNVDNConfig

__all__ = ["PQNVDNConfig"]
