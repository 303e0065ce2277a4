"""Multi-agent MuJoCo (MaMuJoCo, `gymnasium-robotics`): one MuJoCo robot whose joints are split among agents.

`environment.env: mamujoco.<Scenario>_<agent_conf>` names a robot and its agent factorisation, as
`gymnasium_robotics.mamujoco_v1.parallel_env(scenario, agent_conf)` takes them: `mamujoco.HalfCheetah_2x3` (two
agents, three joints each), `mamujoco.HalfCheetah_6x1`, `mamujoco.Ant_2x4`, `mamujoco.Walker2d_2x3`, ... (`TASKS`:
what `marl envs` lists; any factorisation the package knows is accepted). `environment.env_config` holds the
package's options: `agent_obsk` (default 1: each agent observes its joints and those one edge away), and the
underlying Gymnasium MuJoCo env's keyword arguments (`max_episode_steps`, default 1000; `ctrl_cost_weight`, ...).

Every agent receives the robot's reward (a shared team reward; marl's `episode_return_mean` sums the agents'),
and the env's `state()` is the robot's full observation: the global state centralised critics read (MAPPO,
HAPPO, HASAC, MASAC with `critic_state: global_state`). Install with `pip install 'marl[mamujoco]'`.
"""

from __future__ import annotations

import difflib
import importlib.util
from typing import Any

from marl.envs.base import EnvError

PREFIX = "mamujoco."
# The factorisations the heterogeneous-agent papers report on (HAPPO/HATRPO, HASAC: Kuba et al. 2022, Zhong et
# al. 2024; MAPPO's MaMuJoCo results) and a few small ones.
TASKS = (
    "Ant_2x4", "Ant_2x4d", "Ant_4x2", "HalfCheetah_2x3", "HalfCheetah_6x1", "Hopper_3x1", "Humanoid_9|8",
    "Reacher_2x1", "Swimmer_2x1", "Walker2d_2x3",
)
SCENARIOS = (
    "Ant", "HalfCheetah", "Hopper", "HumanoidStandup", "Humanoid", "Reacher", "Swimmer", "Pusher", "Walker2d",
    "InvertedPendulum", "InvertedDoublePendulum", "ManySegmentSwimmer", "ManySegmentAnt", "CoupledHalfCheetah",
)


def is_mamujoco(name: str | None) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def split_task(name: str) -> tuple[str, str]:
    """`mamujoco.HalfCheetah_2x3` -> ("HalfCheetah", "2x3"), or one EnvError line naming what is allowed."""
    task = name[len(PREFIX):]
    scenario, sep, agent_conf = task.partition("_")
    if not sep or not agent_conf or scenario not in SCENARIOS:
        near = difflib.get_close_matches(task, TASKS, n=1)
        hint = f" (did you mean 'mamujoco.{near[0]}'?)" if near else ""
        raise EnvError(f"env {name!r}: a MaMuJoCo task is mamujoco.<Scenario>_<agent_conf>{hint}; scenarios: "
                       f"{list(SCENARIOS)}; tasks: {['mamujoco.' + t for t in TASKS]}")
    return scenario, agent_conf


def make_mamujoco_env(name: str, env_config: dict[str, Any]):
    """The PettingZoo parallel env of `mamujoco.<Scenario>_<agent_conf>` (adapted by the caller)."""
    scenario, agent_conf = split_task(name)
    if importlib.util.find_spec("gymnasium_robotics") is None or importlib.util.find_spec("mujoco") is None:
        raise EnvError(f"env {name!r} needs gymnasium-robotics and mujoco: pip install 'marl[mamujoco]'")
    from gymnasium_robotics import mamujoco_v1

    try:
        return mamujoco_v1.parallel_env(scenario, agent_conf, **dict(env_config))
    except TypeError as err:
        raise EnvError(f"env {name!r} rejected its env_config {sorted(env_config)}: {err}") from None
    except Exception as err:  # the package raises a bare Exception for a factorisation it does not know
        if "partitioning" in str(err):
            raise EnvError(f"env {name!r}: {scenario} has no agent factorisation '{agent_conf}' ({err}); tasks: "
                           f"{['mamujoco.' + t for t in TASKS]}") from None
        raise
