"""Two members of a population playing each other, on runners like any other sampling.

A match is the runner the chooser picks for the run's env (`marl.runners.runner_choice`) with the two members as
frozen policies in their seats, playing fresh episodes (`run_evaluation`): masks, connectors and acting are the
runners' own. Members act as frozen policies do: their masked action distribution sampled -- a mixed strategy is
what a poker policy is, and its greedy action would be a different (more exploitable) policy.

`play_matches` is a pure function of its arguments (the match's runner is seeded by the match), so the same match
gives the same returns in-process, on any Ray actor, and when played again after its actor died. Over Ray,
`MatchPlayer` is the actor an `EnvRunnerGroup` holds for it (`EnvRunnerGroup(config, runner_cls=MatchPlayer)`,
calls spread by `map_calls`): the group's restarts and failure counts are the env runners' own, and a player keeps
no network between matches (a population of many members holds weights, not live modules).
Used by the league's rating matches (`marl.workflow.league_ops`) and PSRO's payoff matches (`marl.population`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from marl.errors import ConfigError
from marl.runners.runner_choice import runner_class

SEATS = ("seat_0", "seat_1")  # a match's two policies: the members seated first and second


class SeatMapping:
    """The env's first agent plays seat_0's member, its second seat_1's."""

    def __init__(self, agents):
        self.seat_of = dict(zip(agents, SEATS))

    def __call__(self, agent_id: str, episode) -> str:
        return self.seat_of[agent_id]


def match_config(config, spec, seed: int):
    """The run's config for one match: its env, each seat a frozen policy of the members' shape (`spec`, the trained
    policy's, spaces resolved), no league or self-play pool, one in-process runner of one env copy (the games one
    after another) whose streams come from `seed` (so the same match gives the same returns wherever it is played)."""
    agents = list(config.env_spec().possible_agents)
    if len(agents) != 2:
        raise ConfigError(f"population matches are two-player; env {config.environment_cfg.env!r} has agents {agents}")
    seat = dataclasses.replace(spec, spaces_from=None)
    match = config.copy()
    match.multi_agent(policies={s: seat for s in SEATS}, policy_mapping=SeatMapping(agents), policies_to_train=[],
                      league=None, self_play=None)
    match.env_runners(num_env_runners=0, num_envs_per_env_runner=1)
    return match.debugging(seed=seed)


def play_matches(config, spec, weights: tuple, episodes: int, seed: int) -> np.ndarray:
    """[episodes, 2] returns of the member of `weights[0]` seated as the env's first agent and of `weights[1]` as its
    second (sampled play); `spec`: the members' policy spec (the trained policy's, spaces resolved)."""
    match = match_config(config, spec, seed)
    runner = runner_class(match)(match, 0)
    try:
        runner.set_weights({"version": 1, "modules": dict(zip(SEATS, weights))})
        runner.set_frozen_policies(SEATS)
        played = runner.run_evaluation(episodes, "episodes", True)["episodes"]
    finally:
        runner.stop()
    return np.array([[e["policy_returns"].get(s, 0.0) for s in SEATS] for e in played]).reshape(len(played), 2)


class MatchPlayer:
    """What a runner group's actor is when it plays matches: `play` builds the match's runner for that match only,
    so the player holds no env or network between matches. Not a runner (it samples nothing): beside `play` it
    answers only what the group asks of every actor (`ping`, `stop`)."""

    def __init__(self, config, worker_index: int = 0, incarnation: int = 0):
        self.config = config

    def play(self, spec, weights_a: dict, weights_b: dict, episodes: int, seed: int) -> np.ndarray:
        return play_matches(self.config, spec, (weights_a, weights_b), episodes, seed)

    def ping(self) -> str:
        return "ok"

    def stop(self) -> None:
        pass
