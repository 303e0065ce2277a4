"""Which runner class samples a config (`env_runners.batched`, `env_runners.compiled_rollout`); the runner group asks.

- `BatchedEnvRunner` for natively batched envs (`batched: auto`) or any batched adapter (`batched: true`),
  `CompiledRolloutRunner` among them for JaxMARL envs (unless `compiled_rollout: false`);
- `VectorEnvRunner` (the dict path over one VMAS env's worlds) for VMAS where the batched path does not run
  what the config asks (or `batched: false`);
- `EnvRunner` otherwise.

All implement the runner contract (`marl.workflow.runner_protocol`).
"""

from __future__ import annotations

import logging

from marl.envs.batched_families import is_registered_batched, natively_batched
from marl.envs.jaxmarl import PREFIX as JAXMARL_PREFIX
from marl.envs.vmas import is_vmas
from marl.errors import ConfigError
from marl.runners.batched_policy import unsupported
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.env_runner import EnvRunner
from marl.runners.jax_rollout import CompiledRolloutRunner
from marl.runners.vector_env_runner import VectorEnvRunner

log = logging.getLogger(__name__)


def runner_class(config) -> type:
    """The runner class for `config`: one of the four above, or one line saying why `batched: true` cannot run."""
    choice, env = config.env_runners_cfg.batched, config.environment_cfg.env
    if choice is True:
        reason = unsupported(config)
        if reason is not None:
            raise ConfigError(f"env_runners.batched: true, but the batched path does not run {reason}; "
                              "set env_runners.batched: false (or auto)")
        return _batched(config)
    if choice == "auto" and natively_batched(env):
        reason = unsupported(config)
        if reason is None:
            return _batched(config)
        log.info("%s: the dict path samples this run (the batched path does not run %s)", env, reason)
    return VectorEnvRunner if is_vmas(env) else EnvRunner


def _batched(config) -> type:
    """The compiled rollout's runner where it may apply (it says why not, or refuses `true`, once built)."""
    setting, env = config.env_runners_cfg.compiled_rollout, config.environment_cfg.env
    if setting is True or (setting == "auto" and env.startswith(JAXMARL_PREFIX) and not is_registered_batched(env)):
        return CompiledRolloutRunner
    return BatchedEnvRunner
