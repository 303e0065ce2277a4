"""The runner contract: what every way of sampling gives the workflow (the runner group calls nothing else).

    class Runner:
        __init__(config, worker_index=0, incarnation=0)   built in-process or as a Ray actor; an incarnation > 0
                                        is a replacement for a failed runner (fresh seeds)
        sample(explore=True) -> SampledBatch   a fragment: rows per policy, the finished episodes' metrics,
                                        the weights version it acted with
        run_evaluation(duration, unit="episodes", explore=False, exploration_step=0) -> dict
                                        fresh episodes, no rows kept: {"episodes": [metrics], "env_steps": n}
        evaluate(num_episodes, explore=False) -> list[dict]   the same, counted in episodes
        set_weights(weights) -> int     loads {"version", "modules", ...} (modules' weights as NumPy, or in-process as
                                        tensors on the learner's device); returns the version it acts with now
        get_weights() -> dict           {"version", "modules"}: what set_weights takes
        get_weights_version() -> int
        get_state() -> dict             what a checkpoint keeps (generators, counters, episodes in progress)
        set_state(state)                continues from get_state()'s output (after a fresh build)
        set_frozen_policies(ids) -> list[str]   policies that act as frozen population members from now on
        set_mapping_state(state)        the policy mapping's state (a league's matchmaking table)
        set_steps_sampled(n)            a replacement runner's share of the run so far (exploration schedules)
        get_spaces() -> dict            policy id -> (observation space, action space)
        ping() / getpid() / node_id()   liveness, process and Ray node
        stop()                          closes its envs

`EnvRunner`, `VectorEnvRunner`, `BatchedEnvRunner` and `CompiledRolloutRunner` implement it
(`marl.runners.runner_choice.runner_class` picks one per config; tests/test_runner_contract.py checks each).
League and PSRO matches are played by them too (`marl.runners.matches`: the two members frozen in
their seats, `run_evaluation`), not by an env loop of their own.
It is a structural protocol: runners sit below the workflow and do not import it.
"""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

from marl.data.records import SampledBatch


@runtime_checkable
class Runner(Protocol):
    def __init__(self, config, worker_index: int = 0, incarnation: int = 0): ...
    def sample(self, explore: bool = True) -> SampledBatch: ...
    def run_evaluation(self, duration: int, unit: str = "episodes", explore: bool = False,
                       exploration_step: int = 0) -> dict: ...
    def evaluate(self, num_episodes: int, explore: bool = False) -> list[dict]: ...
    def set_weights(self, weights: dict) -> int: ...
    def get_weights(self) -> dict: ...
    def get_weights_version(self) -> int: ...
    def get_state(self) -> dict: ...
    def set_state(self, state: dict) -> None: ...
    def set_frozen_policies(self, policy_ids) -> list[str]: ...
    def set_mapping_state(self, state) -> None: ...
    def set_steps_sampled(self, env_steps: int) -> None: ...
    def get_spaces(self) -> dict: ...
    def ping(self) -> str: ...
    def getpid(self) -> int: ...
    def node_id(self) -> str: ...
    def stop(self) -> None: ...


RUNNER_METHODS = tuple(name for name, member in vars(Runner).items() if inspect.isfunction(member)
                       and (name == "__init__" or not name.startswith("_")))


def contract_gaps(cls: type) -> list[str]:
    """What `cls` lacks of the contract: a method missing, or one whose parameters differ in names, order or
    defaults (so the group's calls, positional or by keyword, mean the same on every runner). [] where it keeps it."""
    gaps = []
    for name in RUNNER_METHODS:
        theirs = getattr(cls, name, None)
        if not callable(theirs):
            gaps.append(f"{cls.__name__}.{name} is missing")
            continue
        want, have = _parameters(getattr(Runner, name)), _parameters(theirs)
        if have != want:
            gaps.append(f"{cls.__name__}.{name}{inspect.signature(theirs)} differs from the contract's "
                        f"{inspect.signature(getattr(Runner, name))}")
    return gaps


def _parameters(fn) -> list[tuple]:
    """(name, default) of each parameter, less the keyword Ray adds to an actor class's methods (`_ray_trace_ctx`)."""
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values() if not p.name.startswith("_ray")]
