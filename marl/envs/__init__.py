"""Multi-agent environment protocol, adapters and registry.

Everything above this layer talks to :class:`MultiAgentEnv`; ``make_env`` and
``wrap_env`` turn names and third-party envs (PettingZoo, Gymnasium) into one. Simulators
that step many worlds as tensors keep the :class:`BatchedEnv` contract instead
(``make_batched_env``, ``register_batched_env``; the batched path).
"""

from marl.envs.base import EnvError, MultiAgentEnv
from marl.envs.batched import BatchedEnv, BatchedStep
from marl.envs.batched_families import make_batched_env, register_batched_env
from marl.envs.gymnasium import GymnasiumAdapter
from marl.envs.pettingzoo import AECEnvAdapter, ParallelEnvAdapter
from marl.envs.registry import make_env, register_env, registered_envs, wrap_env
from marl.envs.validation import EnvChecker, EnvOutputError, EnvStepError
from marl.envs.memory import register_gymnasium_ids

register_gymnasium_ids()  # StatelessCartPole-v1, in every process that imports marl (runners too)

__all__ = [
    "AECEnvAdapter",
    "BatchedEnv",
    "BatchedStep",
    "EnvChecker",
    "EnvError",
    "EnvOutputError",
    "EnvStepError",
    "GymnasiumAdapter",
    "MultiAgentEnv",
    "ParallelEnvAdapter",
    "make_batched_env",
    "make_env",
    "register_batched_env",
    "register_env",
    "registered_envs",
    "wrap_env",
]
