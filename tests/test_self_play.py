"""Self-play: complete-episode fragments, the opponent pool and its mapping, snapshots, Elo, beating random play."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marl import PPOConfig
from marl.data import sample_batch as sb
from marl.data.episode import Episode
from marl.modules.random_policy import RandomPolicy
from marl.policies import MappingError, PolicyMapping, resolve_policies
from marl.modules.rl_module import RLModule
from marl.policies.self_play import EloTracker, SelfPlay, score
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
        episodes = batch.episodes
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
        decided = sum(1 for e in batch.episodes if any(r != 0 for r in e["agent_returns"].values()))
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
    with pytest.raises(MappingError, match=r"unknown key 'multi_agent.self_play.size' \(did you mean 'pool_size'\?\)"):
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


class LeftmostLegalMove(RLModule):
    """A fixed opponent that always plays the leftmost legal column; counts the moves it was asked for."""

    moves_asked = 0

    def forward_train(self, batch):
        mask = batch["action_mask"]
        first = (mask.cumsum(-1) == 1) & (mask > 0)
        LeftmostLegalMove.moves_asked += int(mask.shape[0])
        return {"action_dist_inputs": torch.where(first, 0.0, -1e9), "vf_preds": torch.zeros(mask.shape[0])}

    forward_inference = forward_exploration = forward_train


def small_self_play(**self_play) -> PPOConfig:
    return (
        PPOConfig().environment(C4).env_runners(num_envs_per_env_runner=4, rollout_fragment_length=16)
        .training(train_batch_size=256, minibatch_size=64, num_epochs=1)
        .multi_agent(policies={"main": {"model": {"hiddens": [16]}}}, self_play={"pool_size": 2, **self_play})
        .debugging(seed=3)
    )


def test_evaluation_against_a_fixed_opponent_seats_it_in_place_of_the_pool():
    algo = small_self_play(evaluation_opponent=LeftmostLegalMove).build()
    try:
        LeftmostLegalMove.moves_asked = 0
        result = algo.evaluate(num_episodes=12)
        assert LeftmostLegalMove.moves_asked > 0  # the fixed opponent played the other seat
        assert result["evaluation/episodes"] == 12 and result["evaluation/self_play/games"] == 12
        rates = [result[f"evaluation/self_play/{k}_rate"] for k in ("win", "draw", "loss")]
        assert all(0 <= r <= 1 for r in rates) and sum(rates) == pytest.approx(1.0)
        # without an opponent override, the pool plays evaluation games; an override builds runners of its own
        pool_algo = small_self_play().build()
        try:
            LeftmostLegalMove.moves_asked = 0
            assert pool_algo.evaluate(num_episodes=6)["evaluation/self_play/games"] == 6
            assert LeftmostLegalMove.moves_asked == 0
            pool_algo.evaluate(num_episodes=6, opponent=LeftmostLegalMove)
            assert LeftmostLegalMove.moves_asked > 0
        finally:
            pool_algo.stop()
    finally:
        algo.stop()


def test_a_game_scores_the_trained_policys_return_against_the_best_other_one():
    episodes = [
        {"policy_returns": {"main": 1.0, "evaluation_opponent": -1.0}},
        {"policy_returns": {"main": 0.0, "evaluation_opponent": 0.0}},
        {"policy_returns": {"main": -1.0, "evaluation_opponent": 1.0}},
        {"policy_returns": {"other": 1.0}},
    ]
    assert [score(e, "main") for e in episodes] == [1.0, 0.5, 0.0, None]


def test_bad_evaluation_opponents_are_refused_with_what_is_allowed():
    with pytest.raises(MappingError, match=r"evaluation_opponent 'no_such_player' cannot be imported.*allowed: 'random'"):
        SelfPlay.from_any({"evaluation_opponent": "no_such_player"})
    with pytest.raises(MappingError, match="is not a subclass of marl.RLModule"):
        SelfPlay.from_any({"evaluation_opponent": "numpy:ndarray"})
    algo = PPOConfig().environment("CartPole-v1").env_runners(num_envs_per_env_runner=1).build()
    try:
        with pytest.raises(ValueError, match="needs a self-play run"):
            algo.evaluate(num_episodes=1, opponent="random")
    finally:
        algo.stop()


def test_random_policy_plays_uniformly_over_legal_moves_from_the_runners_stream():
    """Greedy acting still draws (runners sample when `greedy_is_sampled`), from the generator they pass in."""
    import gymnasium as gym
    import torch

    module = RandomPolicy(gym.spaces.Box(0, 1, (4,)), gym.spaces.Discrete(4))
    assert module.greedy_is_sampled
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0]]).repeat(3000, 1)
    dist = module.action_dist(module.forward_inference({"obs": torch.zeros(3000, 4), "action_mask": mask})["action_dist_inputs"])
    picks = dist.sample(torch.Generator().manual_seed(3))
    counts = np.bincount(picks.numpy(), minlength=4)
    assert counts[1] == 0 and all(900 < c < 1100 for c in counts[[0, 2, 3]])
    assert torch.equal(picks, dist.sample(torch.Generator().manual_seed(3)))  # the seeded stream, not the global one


def test_greedy_games_against_random_draw_from_the_runners_seeded_stream():
    """Greedy evaluation against `random`: the opponent's moves come from the runner's generator, so
    the process's global torch generator is untouched and a rebuilt run replays the same games."""
    import torch

    def greedy_games():
        algo = small_self_play(evaluation_opponent="random").build()
        try:
            torch.manual_seed(0)
            before = torch.get_rng_state()
            result = algo.evaluate(num_episodes=8, explore=False)
            assert torch.equal(torch.get_rng_state(), before)
            return [result[f"evaluation/self_play/{k}_rate"] for k in ("win", "draw", "loss")] + [result["evaluation/episode_len_mean"]]
        finally:
            algo.stop()

    assert greedy_games() == greedy_games()


@pytest.mark.slow
def test_self_play_learns_to_beat_random_play():
    """Trained only against its own snapshots, main beats a random legal-move player in >= 90 % of games.

    Sampled play (explore=True) is the measure: greedy play of an *untrained* network already wins 80-90 %
    against random Connect Four (its argmax stacks one column and random rarely blocks), so greedy play
    cannot tell learning apart. Untrained sampled play wins about half its games (asserted below); the
    scenario's recipe reaches 0.93-0.97 from 60k env steps on (seeds 0-2, notes in the closing note).
    """
    from marl.config.compose import load_scenario

    config = load_scenario("scenarios/connect_four_self_play.yaml", ["stop.env_steps_total=80000", "evaluation.evaluation_interval=null"])
    algo = config.build()
    try:
        def win_rate() -> float:
            return algo.evaluate(num_episodes=400, explore=True, opponent="random")["evaluation/self_play/win_rate"]

        before = win_rate()
        result = algo.train()
        while result["env_steps_total"] < config.stop_cfg.env_steps_total:
            result = algo.train()
        assert result["self_play/snapshots"] >= 5 and np.isfinite(result["self_play/elo"])
        after = win_rate()
        assert before <= 0.65 and after >= 0.9, f"win rate against random: {before:.3f} before, {after:.3f} after training"
    finally:
        algo.stop()
