"""Two members of a population playing each other: a member's module rebuilt from saved weights
(`MemberFactory`) and matches between two members' weights played by a runner (`play_matches`).

Used by the league's rating matches (`marl.workflow.league_ops`) and PSRO's evaluation matches
(`marl.population`). A match is a way of sampling like any other: the runner the chooser picks for the
run's env (`marl.runners.runner_choice`), with the two members as frozen policies in their seats, plays
fresh episodes (`run_evaluation`), so masks, connectors and acting are the runners' own. Members act as
frozen policies do: their masked action distribution sampled -- a mixed strategy is what a poker policy
is, and its greedy action would be a different (more exploitable) policy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from marl.connectors import build_policy_module
from marl.errors import ConfigError
from marl.runners.runner_choice import runner_class

SEATS = ("seat_0", "seat_1")  # a match's two policies: the members seated first and second


def action_probabilities(module, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[rows, actions] probabilities of a categorical-policy module at observations `obs` with legal `mask`
    (an OpenSpiel member's tabular policy: every information state at once)."""
    batch = {"obs": torch.as_tensor(np.asarray(obs, np.float32)), "action_mask": torch.as_tensor(np.asarray(mask, np.float32))}
    out = module.forward_inference(batch)
    logits = out.get("action_dist_inputs")
    if logits is None:
        raise ConfigError(f"population members need a categorical policy (a module with 'action_dist_inputs'); "
                          f"{type(module).__name__} returns {sorted(out)}")
    logits = logits.masked_fill(batch["action_mask"] < 0.5, float("-inf"))
    return torch.softmax(logits.double(), dim=-1).numpy()


class MemberFactory:
    """Builds the trained policy's module (the shape every member shares) and loads a member's weights into it."""

    def __init__(self, config, policy: str, spec):
        self.config, self.policy, self.spec = config, policy, spec

    def module(self, weights: dict):
        with torch.random.fork_rng(devices=[]):
            module = build_policy_module(self.config, self.policy, self.spec)
        module.set_state(weights)
        return module.eval()


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
