"""What `marl envs` lists: the env names `environment.env` accepts, by family.

- registered: names given to `register_env` in this process (import the module that registers them first)
- pettingzoo / mpe2: module paths of the installed PettingZoo env families (`mpe2.simple_spread_v3`)
- gymnasium: the ids in Gymnasium's registry (`CartPole-v1`), grouped by where they live; ids of the
  installed multi-agent Gymnasium packages (lbforaging, rware) module-qualified (`rware:rware-tiny-2ag-v2`);
  `copies.<id>`: N independent copies of one as a multi-agent env
- vmas: `vmas.<scenario>` for each scenario of the installed VMAS
- openspiel: `openspiel.<game>` for each sequential or simultaneous-move game of the installed OpenSpiel
- jaxmarl: `jaxmarl.<env id>` for each env JaxMARL registers (the batched path; `marl[jaxmarl]`)
- mamujoco: `mamujoco.<Scenario>_<agent_conf>` multi-agent MuJoCo tasks (`marl[mamujoco]`)

PettingZoo modules are found without importing each one: a family whose
extra dependencies are missing still lists its names, and making one then
fails with the missing package named.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re

import gymnasium

from marl.envs.mamujoco import PREFIX as MAMUJOCO_PREFIX, TASKS as MAMUJOCO_TASKS
from marl.envs.registry import registered_envs
from marl.envs.vmas import known_scenarios

_VERSIONED = re.compile(r"_v\d+$")
PETTINGZOO_FAMILIES = (
    "pettingzoo.atari", "pettingzoo.butterfly", "pettingzoo.classic", "pettingzoo.sisl", "mpe2", "magent2.environments",
)


def _versioned_modules(package: str) -> list[str]:
    module = importlib.import_module(package)
    return sorted(f"{package}.{m.name}" for m in pkgutil.iter_modules(module.__path__) if _VERSIONED.search(m.name))


def pettingzoo_families() -> dict[str, list[str] | str]:
    """family package -> env module paths, or the reason the family cannot be listed."""
    out: dict[str, list[str] | str] = {}
    for package in PETTINGZOO_FAMILIES:
        try:
            out[package] = _versioned_modules(package)
        except Exception as err:  # a family that fails to import names its missing dependency
            out[package] = f"unavailable ({type(err).__name__}: {str(err).splitlines()[0]})"
    return out


# Packages that register multi-agent Gymnasium ids when imported: listed module-qualified, the form that imports them.
GYMNASIUM_PACKAGES = ("lbforaging", "rware")


def gymnasium_families() -> dict[str, list[str]]:
    """'gymnasium.<group>' -> ids, grouped by the module of each id's entry point."""
    for package in GYMNASIUM_PACKAGES:
        if importlib.util.find_spec(package) is not None:
            try:
                importlib.import_module(package)
            except Exception:  # a broken optional package must not break the listing
                pass

    out: dict[str, list[str]] = {}
    for env_id, spec in gymnasium.envs.registry.items():
        entry = spec.entry_point
        module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
        parts = module.split(".")
        if module.startswith("gymnasium.envs."):
            group = f"gymnasium.{parts[2]}"
        elif module.startswith("gymnasium"):
            group = "gymnasium.other"  # legacy ids whose entry point only raises (mujoco-py, gym v21/v26 shims)
        else:
            group = parts[0] or "other"  # ids registered by other packages
        if group in GYMNASIUM_PACKAGES:
            env_id = f"{group}:{env_id}"
        out.setdefault(group, []).append(env_id)
    return {k: sorted(v) for k, v in sorted(out.items())}


def vmas_families() -> dict[str, list[str] | str]:
    """'vmas' -> `vmas.<scenario>` names, or why VMAS cannot be listed."""

    if importlib.util.find_spec("vmas") is None:
        return {"vmas": "unavailable (not installed: pip install 'marl[vmas]')"}
    import vmas

    return {"vmas": [f"vmas.{name}" for name in known_scenarios(vmas)]}


def openspiel_families() -> dict[str, list[str] | str]:
    """'openspiel' -> `openspiel.<game>` for the sequential and simultaneous-move games, or why OpenSpiel cannot be listed."""
    if importlib.util.find_spec("pyspiel") is None:
        return {"openspiel": "unavailable (not installed: pip install 'marl[openspiel]')"}
    import pyspiel

    kinds = (pyspiel.GameType.Dynamics.SEQUENTIAL, pyspiel.GameType.Dynamics.SIMULTANEOUS)
    return {"openspiel": sorted(f"openspiel.{t.short_name}" for t in pyspiel.registered_games() if t.dynamics in kinds)}


def jaxmarl_families() -> dict[str, list[str] | str]:
    """'jaxmarl' -> `jaxmarl.<env id>` for every env JaxMARL registers, or why JaxMARL cannot be listed."""
    if importlib.util.find_spec("jaxmarl") is None:
        return {"jaxmarl": "unavailable (not installed: pip install 'marl[jaxmarl]')"}
    try:
        import jaxmarl
    except Exception as err:  # a broken optional install names its problem instead of breaking the listing
        return {"jaxmarl": f"unavailable ({type(err).__name__}: {str(err).splitlines()[0]})"}
    return {"jaxmarl": [f"jaxmarl.{name}" for name in jaxmarl.registered_envs]}


def mamujoco_families() -> dict[str, list[str] | str]:
    """'mamujoco' -> the multi-agent MuJoCo tasks with their agent factorisations, or why they cannot be made."""
    missing = [p for p in ("gymnasium_robotics", "mujoco") if importlib.util.find_spec(p) is None]
    if missing:
        return {"mamujoco": f"unavailable (not installed: {', '.join(missing)}; pip install 'marl[mamujoco]')"}
    return {"mamujoco": [MAMUJOCO_PREFIX + task for task in MAMUJOCO_TASKS]}


KINDS = ("registered", "pettingzoo", "gymnasium", "vmas", "openspiel", "jaxmarl", "mamujoco")


def env_catalog(kinds: list[str] | None = None) -> dict[str, dict[str, list[str] | str]]:
    """kind (one of KINDS) -> family -> names; `kinds`: only those (each kind imports its own packages, so
    `marl envs --family mamujoco` does not import JAX, VMAS or OpenSpiel)."""
    listers = {
        "registered": lambda: {"register_env": registered_envs()},
        "pettingzoo": pettingzoo_families,
        # any id above as N independent copies, one agent each (marl.envs.copies)
        "gymnasium": lambda: {**gymnasium_families(), "copies": "copies.<any id above>, env_config {num_agents: N}: N "
                              "independent copies stepped as one env, agents agent_0..N-1 (RLlib's make_multi_agent)"},
        "vmas": vmas_families,
        "openspiel": openspiel_families,
        "jaxmarl": jaxmarl_families,
        "mamujoco": mamujoco_families,
    }
    return {kind: listers[kind]() for kind in (kinds or KINDS)}
