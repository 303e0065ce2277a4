"""Capabilities: what an algorithm can train, declared once on its config class and checked once.

    class DQNConfig(AlgorithmConfig):
        capabilities = Capabilities(action_spaces=DISCRETE, recurrent=True, overlap=True, mixed_family="replay")

Each algorithm folder's config class states its own record (tests/test_registry.py fails a folder whose class
does not); the plan hands it out per policy (`PolicyPlan.capabilities`: in a MIXED run, the policy's own
algorithm's). It is checked where each fact is first known, once:
- from `AlgorithmConfig.validate`: `env_runners.overlap` and a self-play pool or league (`check_config`), each
  policy's `model.recurrent` (`check_recurrent`);
- `check_action_spaces(config, specs)` from `Algorithm`, once the env's spaces are known; `check_joint_steps`
  there too, once it is known whether the env is turn-based.
The batched path's `unsupported` reads `batched`; MIXED reads `mixed_family`; `marl reference ALGO` prints the record. Every field gates a check (tests/test_capabilities.py).
Deeper checks that ask other questions stay where they are (a module refuses a space it cannot build,
`check_recurrent_support` a built-in module class without a recurrent variant).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from marl.config.registry import discovered
from marl.errors import ConfigError

SPACE_KINDS = ("Discrete", "MultiDiscrete", "Box")  # the action spaces marl's modules act in (marl.modules.spaces)
DISCRETE, BOX = frozenset({"Discrete"}), frozenset({"Box"})
ANY_SPACE = frozenset(SPACE_KINDS)
MIXED_FAMILIES = ("on_policy", "replay")  # the branches of a MIXED graph (marl.algorithms.mixed.workflow)


@dataclass(frozen=True)
class Capabilities:
    action_spaces: frozenset[str]  # the action space kinds (SPACE_KINDS) its policies act in
    recurrent: bool  # it trains stateful modules (`model.recurrent: gru|lstm`) on sequences
    overlap: bool  # its graph samples the next round while the learner trains (`env_runners.overlap`)
    mixed_family: str | None  # how a MIXED run trains one of its policies (MIXED_FAMILIES); None: it cannot
    self_play: bool = False  # its default graph snapshots the trained policy into a pool or league (multi_agent.self_play, .league)
    batched: bool = True  # its runners may take the batched path (`env_runners.batched`; the batched path's `unsupported`)
    note: str = ""  # what the fields do not say, printed by `marl reference` (MIXED: each policy's algorithm decides)

    def __post_init__(self):
        unknown = sorted(set(self.action_spaces) - set(SPACE_KINDS))
        if unknown or not self.action_spaces:
            raise ValueError(f"Capabilities.action_spaces must be a non-empty set of {list(SPACE_KINDS)}, got {unknown or '{}'}")
        if self.mixed_family is not None and self.mixed_family not in MIXED_FAMILIES:
            raise ValueError(f"Capabilities.mixed_family is {self.mixed_family!r}; allowed: {list(MIXED_FAMILIES)} or None")

    def rows(self) -> list[tuple[str, str]]:
        """(fact, value) pairs, in field order: what `marl reference ALGO` prints."""
        yes = {True: "yes", False: "no"}
        rows = [
            ("action spaces", ", ".join(k for k in SPACE_KINDS if k in self.action_spaces)),
            ("`model.recurrent`", yes[self.recurrent]),
            ("`env_runners.overlap`", yes[self.overlap]),
            ("in a MIXED run", self.mixed_family or "no"),
            ("`multi_agent.self_play`, `league`", yes[self.self_play]),
            ("`env_runners.batched`", yes[self.batched]),
        ]
        return rows + ([("note", self.note)] if self.note else [])


# An algorithm kept outside marl (`algo: my_pkg:MyConfig`) that declares no record of its own: nothing is
# refused at this level, as before records existed (its modules still check what they build).
UNDECLARED = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=True, mixed_family=None, self_play=True,
                          note="not declared: nothing checked at this level")


def space_kind(space) -> str:
    """The kind of an action space, as `Capabilities.action_spaces` names it (else its class name)."""
    for kind in SPACE_KINDS:
        if isinstance(space, getattr(gym.spaces, kind)):
            return kind
    return type(space).__name__


def check_config(config) -> None:
    """What the config alone asks of the algorithm's record (validate time): `env_runners.overlap`, and a self-play
    pool or league, whose frozen opponents only the graphs that snapshot the trained policy refresh."""
    if config.env_runners_cfg.overlap and not config.capabilities.overlap:
        raise ConfigError(
            f"'env_runners.overlap' is not supported by {config.algo_name}: its graph does not sample while the learner "
            f"trains; set it to false (algorithms that overlap: {_names_with(lambda c: c.overlap)})", key="env_runners.overlap"
        )
    ma = config.multi_agent_cfg
    pooled = "multi_agent.league" if ma.league is not None else "multi_agent.self_play" if ma.self_play is not None else None
    if pooled and config.workflow is None and not config.capabilities.self_play:
        raise ConfigError(
            f"'{pooled}' needs a graph that snapshots the trained policy into its opponents; {config.algo_name}'s does "
            f"not, so they would stay as initialised (algorithms whose graph does: {_names_with(lambda c: c.self_play)})",
            key=pooled,
        )


def check_recurrent(config, policy_id: str, where: str, kind: str) -> None:
    """A recurrent model asked of a policy whose algorithm does not train stateful modules: one line."""
    plan = config.plan_for(policy_id)
    if not plan.capabilities.recurrent:
        raise ConfigError(
            f"'{where}.recurrent: {kind}' (policy '{policy_id}'): {plan.algo_name} does not train recurrent models; "
            f"remove it, or use one of {_names_with(lambda c: c.recurrent)}"
        )


def check_action_spaces(config, specs: dict) -> None:
    """Each policy's action space (`specs`: resolved, spaces filled) against its algorithm's record."""
    for pid, spec in specs.items():
        plan, kind = config.plan_for(pid), space_kind(spec.action_space)
        caps = plan.capabilities
        if kind not in caps.action_spaces:
            allowed = " or ".join(k for k in SPACE_KINDS if k in caps.action_spaces)
            others = _names_with(lambda c, kind=kind: kind in c.action_spaces)
            raise ConfigError(
                f"{plan.algo_name} acts in {allowed} action spaces; policy '{pid}' has {spec.action_space}"
                + (f" (algorithms for {kind}: {others})" if others != "none" else "")
            )


def check_joint_steps(config, specs: dict, turn_based: bool) -> None:
    """A policy learning from its group's joint steps (VDN, QMIX, MASAC, MADDPG: every agent of the group acting
    at the same env step) on a turn-based env, where one player moves per step: one line, before any sampling."""
    if not turn_based:
        return
    for pid in specs:
        plan = config.plan_for(pid)
        group = plan.group_agent_indices
        if group is not None and len(group) > 1:
            raise ConfigError(
                f"{plan.algo_name} learns policy '{pid}' from joint steps of its agents {list(group)} (all acting at "
                f"the same env step), but {config.environment_cfg.env} is turn-based (one player moves per step); "
                "use an algorithm that learns per agent (PPO, DQN, SAC, ...), or give each player its own policy "
                "(multi_agent.policies and policy_mapping)"
            )


def _names_with(wanted) -> str:
    """The discovered algorithms whose record satisfies `wanted`, for the hint of a refusal."""
    names = [name for name, cls in discovered().items() if wanted(cls.capabilities)]
    return ", ".join(names) if names else "none"
