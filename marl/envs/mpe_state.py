"""mpe2's `state()` from the observations the step just returned, instead of a second pass.

mpe2's `SimpleEnv.state()` computes every possible agent's observation afresh and joins them;
the parallel step has just computed the same observations for the dict it returned
(`SimpleEnv.observe`: the same scenario call, the same float32 cast, on the same world). MAPPO
asks for the state at every env step, so the second pass was a tenth of simple_spread's sampling
time. Where nothing between the two can differ -- mpe2's own parallel env (`aec_to_parallel` over
PettingZoo's order and action-bounds wrappers, which pass observations through) whose scenario
overrides neither `observe` nor `state` -- the parallel adapter joins the returned observations
instead: the identical array (tests/test_mappo.py::test_mpe_state_column_matches_env_state checks it
against the env's own `state()` and each agent's observation).
Any other env, or a step where some possible agent has no observation, calls `state()` as before.
"""

from __future__ import annotations

from typing import Any

from marl.envs.pettingzoo_conversion import ObserveOnceConversion

# Wrappers that hand observations through unchanged (PettingZoo's, as mpe2's make_env stacks them).
_PASS_THROUGH = ("OrderEnforcingWrapper", "AssertOutOfBoundsWrapper", "ClipOutOfBoundsWrapper")


def state_is_joined_observations(env: Any) -> bool:
    """True when `env` (a PettingZoo ParallelEnv) is mpe2's parallel env whose state() joins its agents'
    observations exactly as its step returns them."""
    try:
        from mpe2._mpe_utils.simple_env import SimpleEnv
        from pettingzoo.utils import BaseWrapper
        from pettingzoo.utils.conversions import aec_to_parallel_wrapper
    except ImportError:
        return False
    if type(env) not in (aec_to_parallel_wrapper, ObserveOnceConversion):  # (the latter: upstream's, observing once)
        return False
    inner = env.aec_env
    while isinstance(inner, BaseWrapper):
        if type(inner).__name__ not in _PASS_THROUGH or type(inner).__module__.split(".")[0] != "pettingzoo":
            return False
        inner = inner.env
    cls = type(inner)
    return isinstance(inner, SimpleEnv) and cls.state is SimpleEnv.state and cls.observe is SimpleEnv.observe
