"""Operators read the run's resolved policies from their context (ctx.policy_specs, agents_of, possible_agents):
once Algorithm is built, building or running an operator makes no probe env to learn them."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

import marl
import marl.envs
from marl import PPOConfig
from marl.cli.serve import serving_config

ROOT = Path(__file__).resolve().parents[1]
# Rating games are played by a runner of their own (`marl.runners.matches`), whose envs are its job;
# the only envs the tests below let be made, and count.
MATCH_GAMES = "marl.runners.env_runner"


def forbid_new_envs(monkeypatch) -> list:
    """Every marl module's `make_env` (and marl.envs.make_env, for function-local imports) raises from now on,
    except the runners' (the match games'); returns the list their env makes are appended to."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"an env was made after Algorithm.build: make_env{args}")

    monkeypatch.setattr(marl.envs, "make_env", refuse)
    for name, module in list(sys.modules.items()):
        if name.startswith("marl.") and name != MATCH_GAMES and getattr(module, "make_env", None) is not None:
            monkeypatch.setattr(module, "make_env", refuse)
    made: list = []
    games = sys.modules[MATCH_GAMES]
    real = games.make_env

    def counted(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(games, "make_env", counted)
    return made


def test_league_rating_games_take_their_members_spaces_from_the_context(monkeypatch):
    config = (
        PPOConfig().environment("pettingzoo.classic.connect_four_v3")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=16, batch_mode="complete_episodes")
        .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
        .multi_agent(policies={"main": {"model": {"hiddens": [16]}}},
                     league={"max_snapshots": 3, "snapshot_every": 1, "rating_games": 2,
                             "main_exploiters": 0, "league_exploiters": 0})
        .debugging(seed=3)
    )
    algo = config.build()
    try:
        assert set(algo.context.policy_specs) == set(algo.policy_specs)
        assert algo.context.possible_agents == ["player_0", "player_1"]
        made = forbid_new_envs(monkeypatch)
        algo.train()  # main.v1 is taken and plays its 2 rating games against main.v0
        assert algo.context.checkpointables["league"].ratings.games("main.v1", "main.v0") == 2
        assert made  # the rating games did run (on their runner's envs), with no probe env beside them
    finally:
        algo.stop()


def test_serve_builds_its_server_from_the_context(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = marl.load_scenario(str(ROOT / "scenarios/simple_spread_serve.yaml"))
    algo = serving_config(config, "127.0.0.1", port).build()
    try:
        made = forbid_new_envs(monkeypatch)
        algo.reset_workflow()  # builds every operator again, serve (and its server) included
        (server,) = [d["operator"].server for _, d in algo.workflow.graph.nodes(data=True) if d["op"] == "serve"]
        assert server.possible_agents == algo.context.possible_agents == ["agent_0", "agent_1", "agent_2"]
        assert server.action_spaces == {pid: spec.action_space for pid, spec in algo.policy_specs.items()}
        assert made == []  # (no runner either)
    finally:
        algo.stop()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
