from marl.algorithms.cql.config import CQLConfig

__all__ = ["CQLConfig"]
