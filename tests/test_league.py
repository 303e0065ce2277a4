"""The league (multi_agent.league): PFSP, members and mapping, snapshot rules, checkpoint/resume, bad config, learning."""

from __future__ import annotations

import numpy as np
import pytest

from marl import PPOConfig
from marl.data.episode import Episode
from marl.policies import MappingError
from marl.policies.league import League, LeagueMapping, pfsp_probabilities
from tests.actor_kill import kill_and_wait

C4 = "pettingzoo.classic.connect_four_v3"


def test_pfsp_favours_the_opponents_the_learner_beats_least():
    np.testing.assert_allclose(pfsp_probabilities([0.0, 0.5, 1.0], "squared"), [0.8, 0.2, 0.0])
    np.testing.assert_allclose(pfsp_probabilities([0.5, 0.9, np.nan], "variance"), np.array([0.25, 0.09, 0.25]) / 0.59)
    np.testing.assert_allclose(pfsp_probabilities([0.2, 0.6], "linear"), [2 / 3, 1 / 3])
    np.testing.assert_allclose(pfsp_probabilities([0.2, 0.6], "uniform"), [0.5, 0.5])
    np.testing.assert_allclose(pfsp_probabilities([1.0, 1.0], "squared"), [0.5, 0.5])  # beats everyone: uniform
    with pytest.raises(MappingError, match="no members to draw from"):
        pfsp_probabilities([], "squared")


def test_league_members_and_a_mapping_that_seats_one_drawn_pair_per_episode():
    league = League(main_agents=2, main_exploiters=1, league_exploiters=1, max_snapshots=3)
    assert league.roles() == {"main": "main_agent", "main1": "main_agent", "main_exploiter0": "main_exploiter",
                              "league_exploiter0": "league_exploiter"}
    assert league.snapshot_ids == ["main@0", "main@1", "main@2"]
    mapping = LeagueMapping(league)
    assert league.learner_weights() == [["main", 0.25], ["main1", 0.25], ["main_exploiter0", 0.25], ["league_exploiter0", 0.25]]
    weighted = League(main_exploiters=2, main_share=0.6).learner_weights()  # 0.4 over the three exploiters
    assert [m for m, _ in weighted] == ["main", "main_exploiter0", "main_exploiter1", "league_exploiter0"]
    assert [w for _, w in weighted] == pytest.approx([0.6, 0.4 / 3, 0.4 / 3, 0.4 / 3])
    mapping.set_state({"learners": [["main", 0.5], ["league_exploiter0", 0.5]],
                       "opponents": {"main": [["main@0", 0.9], ["main@1", 0.1]], "league_exploiter0": [["main@2", 1.0]]}})
    pairs, firsts = [], set()
    for eid in range(2000):
        episode = Episode(id=eid, env_index=0)
        for agent in ("player_0", "player_1"):
            episode.bind(agent, mapping(agent, episode))
        seats = (episode.policy_of["player_0"], episode.policy_of["player_1"])
        learner = next(p for p in seats if p in ("main", "league_exploiter0"))
        pairs.append((learner, next(p for p in seats if p != learner)))
        firsts.add(seats[0] == learner)
    assert firsts == {True, False}
    mains = [o for learner, o in pairs if learner == "main"]
    assert 0.85 < mains.count("main@0") / len(mains) < 0.95  # the table's probabilities, drawn on the runner
    assert {o for learner, o in pairs if learner == "league_exploiter0"} == {"main@2"}


def small_league(**league) -> PPOConfig:
    return (
        PPOConfig().environment(C4)
        .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=16, batch_mode="complete_episodes")
        .training(train_batch_size=256, minibatch_size=64, num_epochs=1)
        .multi_agent(policies={"main": {"model": {"hiddens": [16]}}},
                     league={"max_snapshots": 3, "snapshot_every": 3, "min_games": 5, **league})
        .debugging(seed=3)
    )


def test_snapshots_after_a_budget_or_a_win_rate_fill_the_slots_with_copies():
    # snapshot_win_rate within reach of a fresh member after 5 games (about half won), a budget of 3 updates
    algo = small_league(snapshot_win_rate=1.0, main_exploiters=0, league_exploiters=0).build()
    try:
        for name in ("league_matches", "league_snapshot", "matchmaking"):
            assert name in algo.workflow.graph
        weights = algo.learners.get_weights()["modules"]
        for k, v in weights["main"].items():  # the league starts with main's initial weights in slot 0
            np.testing.assert_array_equal(weights["main@0"][k], v)
        sizes = [algo.train()["league/size"] for _ in range(3)]
        assert sizes == [1, 1, 2]  # win rate 1.0 is out of reach: only the budget (3 updates) snapshots
        result = algo.train()
        assert result["league/snapshots"] == 2 and not any(k.startswith("losses/main@") for k in result)
        weights = algo.learners.get_weights()["modules"]
        assert any(not np.array_equal(weights["main@1"][k], weights["main"][k]) for k in weights["main"])  # main moved on
        assert "league/rating/main.v1" in result and "league/win_rate/main_agent" in result
        evaluation = algo.evaluate(num_episodes=6, opponent="random")  # main against a fixed opponent, not the league
        assert evaluation["evaluation/self_play/games"] == 6
    finally:
        algo.stop()
    algo = small_league(snapshot_win_rate=0.05, snapshot_every=100, main_exploiters=0, league_exploiters=0).build()
    try:  # a threshold every member passes after min_games: a snapshot as soon as 5 games are in
        sizes = [algo.train()["league/size"] for _ in range(3)]
        assert sizes[-1] > 1
    finally:
        algo.stop()



def test_snapshot_against_previous_counts_only_a_main_agents_games_against_its_latest_snapshot():
    from marl.workflow.league_ops import LeagueBook

    book = LeagueBook(League(snapshot_against="previous"))
    book.versions["main"] = 2  # main.v0 and main.v1 taken
    assert book.counts_for_snapshot("main", "main.v1")
    assert not any(book.counts_for_snapshot("main", m) for m in ("main.v0", "main_exploiter0", "league_exploiter0.v0"))
    assert book.counts_for_snapshot("main_exploiter0", "main")  # exploiters never meet their own snapshots
    assert LeagueBook(League()).counts_for_snapshot("main", "main.v0")  # "league" (the default): every member
    # In a run: main's tally since main.v0 holds exactly its games against main.v0 (win rate 1.0: no snapshot due)
    algo = small_league(snapshot_against="previous", snapshot_every=100, snapshot_win_rate=1.0, self_play=0.0,
                        main_exploiters=0, league_exploiters=0).build()
    try:
        for _ in range(2):
            algo.train()
        book = algo.context.checkpointables["league"]
        assert book.since["main"][1] == book.ratings.games("main", "main.v0") > 0
    finally:
        algo.stop()

def test_rating_games_rate_each_new_snapshot_against_its_members_previous_one():
    # rating_games: 6 sampled games (3 in each seat) between main.v(n) and main.v(n-1) as main.v(n) is taken; none
    # between snapshots further apart, none for a member's first snapshot; recorded like the league's own games
    algo = small_league(snapshot_every=1, rating_games=6, max_snapshots=4, main_exploiters=0, league_exploiters=0).build()
    try:
        for _ in range(3):
            result = algo.train()
        ratings = algo.context.checkpointables["league"].ratings
        assert [ratings.games(f"main.v{n}", f"main.v{n - 1}") for n in (1, 2, 3)] == [6, 6, 6]
        assert ratings.games("main.v2", "main.v0") == ratings.games("main.v3", "main.v1") == 0
        assert ratings.counts[("main.v3", "main.v2")][0] + ratings.counts[("main.v2", "main.v3")][0] == 6  # scores sum
        assert result["league/rating/main.v3"] == ratings.ordinal("main.v3")
    finally:
        algo.stop()
    plain = small_league(snapshot_every=1, main_exploiters=0, league_exploiters=0).build()  # rating_games: 0 (default)
    try:
        plain.train()
        assert plain.context.checkpointables["league"].ratings.games("main.v1", "main.v0") == 0
    finally:
        plain.stop()


def test_a_permanent_random_member_plays_the_main_agents_share_of_games_and_is_rated():
    # random_share 0.5: half of main's games against `random` (a uniformly random legal-move player, never trained),
    # the rest self-play (0.2) and snapshots; the exploiters never meet it, and its games leave the snapshot rule alone
    # (no snapshot is due here: the tally since the last one holds every game of main but those against random)
    algo = small_league(random_share=0.5, self_play=0.2, snapshot_every=100, snapshot_win_rate=1.0, main_share=0.5).build()
    try:
        for _ in range(3):
            result = algo.train()
        book = algo.context.checkpointables["league"]
        assert dict(map(tuple, book.table["opponents"]["main"]))["random"] == pytest.approx(0.5)
        assert sum(p for _, p in book.table["opponents"]["main"]) == pytest.approx(1.0)
        assert all("random" not in dict(map(tuple, book.table["opponents"][m])) for m in ("main_exploiter0", "league_exploiter0"))
        against_random = book.ratings.games("main", "random")
        assert against_random > 0 and book.ratings.members[3:5] == ["random", "main.v0"]
        assert book.since["main"][1] + against_random == sum(book.ratings.games("main", m) for m in book.ratings.members)
        assert "league/rating/random" in result and not any(k.startswith("losses/random") for k in result)
        assert "random" in algo.config.league().opponent_ids  # evaluation seats its fixed opponent there too
        assert algo.evaluate(num_episodes=4, opponent="random")["evaluation/self_play/games"] == 4
    finally:
        algo.stop()
    assert "random" not in small_league().policy_specs()  # random_share 0 (the default): no such member


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[m].keys() == b[m].keys() and all(np.array_equal(a[m][k], b[m][k]) for k in a[m]) for m in a)


def _deterministic(result: dict) -> dict:
    """A result without its clock readings (times, throughputs), which no two runs share."""
    return {k: v for k, v in result.items() if isinstance(v, (int, float)) and not any(
        word in k for word in ("time", "_s", "per_s", "throughput", "seconds", "timestamp"))}


def test_league_state_survives_save_and_restore_bit_identically(tmp_path):
    # two iterations (a budget snapshot comes with the third: snapshot_every=3), save, restore into a fresh build:
    # the same members' weights (trained and frozen slots), ratings, tallies and matchmaking table; then one more
    # iteration from each gives the same results, weights and league
    algo = small_league(snapshot_every=3, rating_games=4).build()  # with rating matches after the third's snapshots
    try:
        for _ in range(2):
            algo.train()
        path = algo.save(tmp_path / "ckpt")
        saved = algo.context.checkpointables["league"].get_state()
        saved_weights = algo.learners.get_weights()["modules"]
        assert all(since[0] == 2 and since[1] > 0 for since in saved["since"].values())  # updates and games to carry over
        after = algo.train()
        after_weights, after_book = algo.learners.get_weights()["modules"], algo.context.checkpointables["league"].get_state()
    finally:
        algo.stop()
    restored = small_league(snapshot_every=3, rating_games=4).build()
    try:
        restored.restore(path)
        book = restored.context.checkpointables["league"]
        assert book.get_state() == saved
        assert _same_weights(restored.learners.get_weights()["modules"], saved_weights)
        assert restored.runners.local.mapping._fn.table == saved["table"]  # the runners draw from the restored table
        again = restored.train()
        assert _deterministic(again) == _deterministic(after)
        assert {"league/size", "league/games", "league/rating/main", "league/elo/main"} <= set(_deterministic(after))
        assert _same_weights(restored.learners.get_weights()["modules"], after_weights)
        assert book.get_state() == after_book and after_book["snapshots"] == 4  # main@0, then each trained member's
        assert book.ratings.games("main.v1", "main.v0") == 4  # main's second snapshot met its first (exploiters: one each)
    finally:
        restored.stop()


@pytest.mark.parametrize("league, message", [
    ({"snapshot_win_rate": 1.5}, r"multi_agent.league.snapshot_win_rate must be a number in \(0, 1\], got 1.5"),
    ({"self_play": -0.1}, r"multi_agent.league.self_play must be a number in \[0, 1\], got -0.1"),
    ({"max_snapshots": 0}, "multi_agent.league.max_snapshots must be an integer >= 1, got 0"),
    ({"rating_games": -2}, "multi_agent.league.rating_games must be an integer >= 0, got -2"),
    ({"rating_games": 1.5}, "multi_agent.league.rating_games must be an integer >= 0, got 1.5"),
    ({"main_share": 0}, r"multi_agent.league.main_share must be null or a number in \(0, 1\], got 0"),
    ({"main_share": 0.5, "main_exploiters": 0, "league_exploiters": 0}, "leaves episodes to exploiters, but the league has none"),
    ({"random_share": 1.5}, r"multi_agent.league.random_share must be a number in \[0, 1\], got 1.5"),
    ({"random_share": 0.7, "self_play": 0.35}, r"multi_agent.league.self_play \+ random_share must be <= 1"),
    ({"pfsp": "cubic"}, r"multi_agent.league.pfsp must be one of \['squared', 'variance', 'linear', 'uniform'\], got 'cubic'"),
    ({"snapshot_against": "last"}, r"multi_agent.league.snapshot_against must be one of \['league', 'previous'\], got 'last'"),
    ({"roles": 3}, r"unknown key 'multi_agent.league.roles'; league holds \['elo_k', "),
    ({"policy": "nope"}, "multi_agent.league.policy 'nope' is not a declared policy"),
])
def test_bad_league_config_is_one_line(league, message):
    with pytest.raises(MappingError, match=message) as err:
        small_league(**league).policy_specs()
    assert "\n" not in str(err.value)
    with pytest.raises(MappingError, match="alternatives"):
        PPOConfig().multi_agent(policies={"main": {}}, league={}, self_play={}).policy_specs()
    clash = PPOConfig().multi_agent(policies={"main": {}, "random": {}}, league={"random_share": 0.1})
    with pytest.raises(MappingError, match="adds the member 'random', which is also a declared policy") as err:
        clash.policy_specs()
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_league_main_agent_learns_to_beat_random_play_as_the_league_grows():
    """100k env steps of scenarios/connect_four_league.yaml (about 80 s on a quiet machine, 285 s at a load of 12):
    main wins >= 0.93 of sampled games against random (0.52 untrained; this run: 0.950, with 5 main snapshots whose
    mu rise 21.4 -> 39.4 and which won 33, 43, 42, 32 of their 50 rating games; the issue's
    0.95 within 200k on 3 seeds is benchmarks/studies/league_targets.py's record), the league grows, and main's snapshots,
    each taken when main beat the one before at >= 0.6 over >= 50 games (snapshot_against: previous), have mu and
    ordinal rising one after the other and each did not lose its 50 rating games against the one before
    (rating_games: 50). lr=0 fails it: no member beats another at 0.6, the league keeps its one snapshot."""
    from marl.config.compose import load_scenario

    config = load_scenario("scenarios/connect_four_league.yaml", ["stop.env_steps_total=100000", "evaluation.evaluation_interval=null"])
    algo = config.build()
    try:
        def win_rate() -> float:
            return algo.evaluate(num_episodes=400, explore=True, opponent="random")["evaluation/self_play/win_rate"]

        before = win_rate()
        first = result = algo.train()
        while result["env_steps_total"] < config.stop_cfg.env_steps_total:
            result = algo.train()
        after = win_rate()
        assert first["league/size"] == 1 and result["league/size"] >= 4
        assert result["league/rating/main"] > first["league/rating/main"]
        # mu, not the ordinal mu - 3 sigma, which rises with the games played alone (sigma shrinks), learning or not
        ratings = algo.context.checkpointables["league"].ratings
        snapshots = sorted((m for m in ratings.members if m.startswith("main.v")), key=lambda m: int(m.split(".v")[1]))
        mu = [ratings.skill[m][0] for m in snapshots]
        assert len(mu) >= 3 and all(b > a for a, b in zip(mu, mu[1:])), (
            f"main's snapshots' mu in the order taken: {[round(v, 1) for v in mu]}")
        ordinal = [ratings.ordinal(m) for m in snapshots]  # the rating league/rating/<member> logs
        assert all(b > a for a, b in zip(ordinal, ordinal[1:])), f"ordinals in the order taken: {ordinal}"
        # rating_games: each snapshot met the one before it 50 times and did not lose that match
        duels = [ratings.counts.get((b, a), [0, 0]) for a, b in zip(snapshots, snapshots[1:])]
        assert all(games == 50 and score >= 25 for score, games in duels), f"later snapshot's [score, games]: {duels}"
        assert before <= 0.65 and after >= 0.93, f"win rate against random: {before:.3f} before, {after:.3f} after training"
    finally:
        algo.stop()


@pytest.mark.slow
def test_markov_soccer_league_main_agent_learns_to_beat_random_play():
    """24k env steps of scenarios/markov_soccer_league.yaml (14 s here at a load of 1.4 on 2 cores, 123 s at a load
    of 20): main wins >= 0.75 of sampled games
    against random (about 0.5 untrained, and with lr=0; 0.87-0.95 measured from 25k to 175k, seed 0) and its
    rating rises. Markov soccer shows both players the same grid: without the seat one-hot the OpenSpiel adapter
    appends (marl/envs/openspiel.py) main cannot tell which player it is and learns slower (0.71 at 26k env steps,
    0.87 with it, seed 0). The issue's target (0.85 and
    league size 8 within 1M env steps) is benchmarks/studies/league_targets.py's."""
    from marl.config.compose import load_scenario

    config = load_scenario("scenarios/markov_soccer_league.yaml", ["stop.env_steps_total=24000", "evaluation.evaluation_interval=null"])
    algo = config.build()
    try:
        def win_rate(games: int) -> float:
            return algo.evaluate(num_episodes=games, explore=True, opponent="random")["evaluation/self_play/win_rate"]

        before = win_rate(100)  # untrained games are long (about 110 steps): fewer of them
        first = result = algo.train()
        while result["env_steps_total"] < config.stop_cfg.env_steps_total:
            result = algo.train()
        after = win_rate(200)
        assert before <= 0.65 and after >= 0.75, f"win rate against random: {before:.3f} before, {after:.3f} after training"
        assert result["league/games"] > 0 and result["league/rating/main"] > first["league/rating/main"]
    finally:
        algo.stop()


def test_matchmaking_reaches_ray_runners_and_a_replacement_runner(ray_session):
    # One runner actor and its replacement: each actor start imports torch and marl (10-30 s on a loaded machine),
    # and the claim -- the table reaches a remote runner, and a new one gets it at start -- needs no second.
    algo = small_league().env_runners(num_env_runners=1).build()
    try:
        initial = algo.runners.remote[0].__ray_call__.remote(lambda runner: runner.mapping._fn.table)
        initial = ray_session.get(initial)
        for _ in range(2):
            algo.train()
        table = algo.context.checkpointables["league"].table
        assert len(table["opponents"]["league_exploiter0"]) >= 1 and table != initial  # matchmaking changed it
        mapping_table = lambda runner: runner.mapping._fn.table  # noqa: E731
        assert ray_session.get([a.__ray_call__.remote(mapping_table) for a in algo.runners.remote]) == [table]
        kill_and_wait(ray_session, algo.runners.remote[0])
        algo.runners.call_all("ping")  # finds the dead runner and replaces it, with no matchmaking push since
        assert algo.runners.restarts == 1
        assert ray_session.get(algo.runners.remote[0].__ray_call__.remote(mapping_table)) == table
    finally:
        algo.stop()



def test_marl_league_on_a_league_run_writes_its_ratings_win_rates_and_curves(tmp_path, capsys):
    from marl.cli import main

    run = tmp_path / "run"
    assert main(["train", "scenarios/connect_four_league.yaml", "--output", str(run), "--quiet", "stop.iterations=3",
                 "stop.env_steps_total=null", "training.train_batch_size=256", "training.minibatch_size=128",
                 "training.num_epochs=1", "evaluation.evaluation_interval=2", "evaluation.evaluation_duration=4",
                 "multi_agent.league.snapshot_every=2"]) == 0
    assert main(["league", str(run), "--output", str(tmp_path / "report")]) == 0
    written = capsys.readouterr().out.split()
    assert [p.rsplit("/", 1)[1] for p in written] == ["ratings.md", "payoffs.png", "ratings.png"]
    table = (tmp_path / "report" / "ratings.md").read_text()
    for member in ("main", "main_exploiter0", "league_exploiter0", "main.v0", "main.v1"):  # trained members, snapshots
        assert f"| {member} |" in table, table
    assert all((tmp_path / "report" / name).stat().st_size > 10_000 for name in ("payoffs.png", "ratings.png"))
