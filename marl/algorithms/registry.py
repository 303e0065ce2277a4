"""Algorithm names (`algo:` in a scenario file) -> config classes."""

from __future__ import annotations

from marl.algorithms.ppo import PPOConfig

ALGORITHMS: dict[str, type] = {"PPO": PPOConfig}


def config_class(name: str):
    cls = ALGORITHMS.get(str(name).upper())
    if cls is None:
        from marl.algorithms.sections import ConfigError

        raise ConfigError(f"unknown algo '{name}'; available: {sorted(ALGORITHMS)}")
    return cls
