"""Envs whose constructor offers both action kinds: which `env_config` key picks Box or Discrete actions.

VMAS scenarios (`continuous_actions`), PettingZoo's MPE (`continuous_actions`) and Pistonball (`continuous`),
JaxMARL's MPE (`action_type`) and Gymnasium ids such as LunarLander (`continuous`) can each be made with Box
or with Discrete actions. Where the user's env_config leaves the key out and the algorithm acts in only the
other kind, the config's build sets it (`marl.algorithms.env_spec.action_kind_choice`), as BenchMARL makes
VMAS tasks with the actions its algorithm takes: `marl train --algo QMIX --env vmas.navigation` trains on
VMAS's discrete actions rather than stopping at "QMIX acts in Discrete action spaces".
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

import gymnasium

from marl.envs.copies import PREFIX as COPIES
from marl.envs.jaxmarl import PREFIX as JAXMARL
from marl.envs.openspiel import PREFIX as OPENSPIEL
from marl.envs.vmas import PREFIX as VMAS


@dataclass(frozen=True)
class ActionKindKey:
    key: str  # the env_config key
    box: Any  # its value for Box actions
    discrete: Any  # its value for Discrete actions

    def value(self, kind: str) -> Any:
        return self.box if kind == "Box" else self.discrete


_BOOLEAN_KEYS = ("continuous_actions", "continuous")  # constructor parameters that switch Box actions on


def action_kind_key(env: str) -> ActionKindKey | None:
    """The key of `env`'s constructor that picks its action kind, or None where it has none (or it cannot tell)."""
    if env.startswith(VMAS):
        return ActionKindKey("continuous_actions", True, False)
    if env.startswith(JAXMARL + "MPE_"):
        return ActionKindKey("action_type", "Continuous", "Discrete")
    if env.startswith((JAXMARL, OPENSPIEL, COPIES)):
        return None
    return _boolean_parameter(_constructor(env))


def _constructor(env: str):
    """The class or function that makes `env`: a PettingZoo-style module's raw_env/env, a Gymnasium id's entry point."""
    try:
        module = importlib.import_module(env)
        return getattr(module, "raw_env", None) or getattr(module, "env", None)
    except Exception:  # (not a module path: a Gymnasium id, or nothing marl knows; make_env says which)
        pass
    try:
        entry = gymnasium.spec(env.split(":")[-1]).entry_point
        if callable(entry):
            return entry
        module, name = entry.split(":")
        return getattr(importlib.import_module(module), name)
    except Exception:
        return None


def _boolean_parameter(maker) -> ActionKindKey | None:
    if maker is None:
        return None
    try:
        params = inspect.signature(maker).parameters
    except (TypeError, ValueError):
        return None
    for key in _BOOLEAN_KEYS:
        if key in params and isinstance(params[key].default, bool):
            return ActionKindKey(key, True, False)
    return None
