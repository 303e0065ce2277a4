"""Algorithm names (`algo:` in a scenario file) -> config classes."""

from __future__ import annotations

from marl.algorithms.appo import APPOConfig
from marl.algorithms.dqn import DQNConfig
from marl.algorithms.impala import IMPALAConfig
from marl.algorithms.mappo import MAPPOConfig
from marl.algorithms.mixed import MixedConfig
from marl.algorithms.ppo import PPOConfig
from marl.algorithms.qmix import QMIXConfig
from marl.algorithms.vdn import VDNConfig

ALGORITHMS: dict[str, type] = {"PPO": PPOConfig, "DQN": DQNConfig, "APPO": APPOConfig, "IMPALA": IMPALAConfig}
ALGORITHMS.update({"VDN": VDNConfig, "QMIX": QMIXConfig})
ALGORITHMS.update({"MAPPO": MAPPOConfig, "MIXED": MixedConfig})


def config_class(name: str):
    cls = ALGORITHMS.get(str(name).upper())
    if cls is None:
        from marl.algorithms.sections import ConfigError

        raise ConfigError(f"unknown algo '{name}'; available: {sorted(ALGORITHMS)}")
    return cls
