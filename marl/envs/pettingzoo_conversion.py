"""PettingZoo's AEC-to-parallel conversion, stepped without the observations it throws away.

`parallel_env()` of mpe2, butterfly and SISL is an AEC env converted by PettingZoo's
`aec_to_parallel_wrapper`. Its `step()` calls `aec_env.last()` before each agent's AEC step and
discards all five values, then observes every agent again for the result: each parallel step renders
every agent's observation twice. On full Pistonball an observation is a 457x120x3 crop of the screen,
so half the observing is wasted. `last(observe=False)` (PettingZoo's `AECEnv.last`) returns the same
flags without the observation.
"""

from __future__ import annotations

from functools import partial

from pettingzoo.utils.conversions import aec_to_parallel_wrapper
from pettingzoo.utils.wrappers import BaseParallelWrapper


class ObserveOnceConversion(aec_to_parallel_wrapper):
    """`aec_to_parallel_wrapper` whose `step()` observes each agent once: upstream's own step, run with the
    AEC env's `last` answering `last(observe=False)` (the call whose values upstream discards; its other
    observations go through `observe()`, untouched). Same observations, rewards, flags and infos as upstream,
    step for step (tests/test_pettingzoo_conversion.py)."""

    def step(self, actions):
        aec_env = self.aec_env
        aec_env.last = partial(type(aec_env).last, aec_env, observe=False)  # an instance attribute shadows the method
        try:
            return super().step(actions)
        finally:
            del aec_env.last


def upstream_conversion(env):
    """PettingZoo's own `aec_to_parallel_wrapper` under `env`'s parallel wrappers (SuperSuit's, a user's), or None:
    another parallel env, or a subclass of the conversion (which may have its own step())."""
    conversion = env
    while isinstance(conversion, BaseParallelWrapper):
        conversion = conversion.env
    return conversion if type(conversion) is aec_to_parallel_wrapper else None


def observing_once(env):
    """`env` with its conversion observing once per agent and step (in place, as `without_guard_wrappers`:
    `make_env` built the env for its adapter alone). Only `upstream_conversion(env)` is changed; any other
    parallel env is left as it is. The class swap keeps every attribute the conversion holds:
    ObserveOnceConversion adds none."""
    conversion = upstream_conversion(env)
    if conversion is not None:
        conversion.__class__ = ObserveOnceConversion
    return env
