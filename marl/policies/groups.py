"""Default policies for agents that are not alike: one policy per group of agents with the same spaces.

With no `multi_agent.policies` declared, every agent shares 'default_policy', which needs every agent to observe
and act in the same spaces. Envs with agent types that differ (VMAS/MPE simple_tag's adversaries and good
agents, simple_adversary, simple_world_comm) would then stop at "policy 'default_policy' is shared by agents
with different observation spaces". Instead, as BenchMARL groups agents, the build declares one policy per
group, named after its agents (`adversary_0`, `adversary_1` -> `adversary`), mapped by glob pattern
(`adversary_*`) where the pattern picks exactly that group's agents, else agent by agent; config.yaml records
both. Where names do not separate the kinds of agents, groups are the sets of agents with equal spaces
(`group_0`, `group_1`, ... in agent order).
"""

from __future__ import annotations

import fnmatch
import re
from typing import Callable

_INDEX = re.compile(r"_?\d+$")


def agent_groups(agents: list[str], spaces: Callable[[str], tuple]) -> dict[str, list[str]] | None:
    """Group name -> its agents (in agent order) where the agents' (observation, action) spaces differ; None where
    they are all alike (one shared policy serves them)."""
    if len({_key(spaces(a)) for a in agents}) <= 1:
        return None
    by_name: dict[str, list[str]] = {}
    for agent in agents:
        by_name.setdefault(_INDEX.sub("", agent) or agent, []).append(agent)
    if all(len({_key(spaces(a)) for a in members}) == 1 for members in by_name.values()):
        return by_name
    by_spaces: dict[str, list[str]] = {}
    for agent in agents:
        by_spaces.setdefault(_key(spaces(agent)), []).append(agent)
    return {f"group_{i}": members for i, members in enumerate(by_spaces.values())}


def group_mapping(groups: dict[str, list[str]]) -> dict[str, str]:
    """`multi_agent.policy_mapping` for `groups`: `name_*` where it matches exactly the group's agents, else names."""
    everyone = [a for members in groups.values() for a in members]
    mapping: dict[str, str] = {}
    for name, members in groups.items():
        pattern = f"{name}_*"
        if sorted(a for a in everyone if fnmatch.fnmatchcase(a, pattern)) == sorted(members):
            mapping[pattern] = name
        else:
            mapping.update({a: name for a in members})
    return mapping


def _key(spaces: tuple) -> str:
    return repr(spaces)  # (gymnasium spaces compare by value; their repr names shape, bounds and dtype)
