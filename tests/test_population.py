"""Population training: ratings (Elo, openskill, win rates), meta-solvers (Nash LP, projected replicator
dynamics, uniform), PSRO over PPO on kuhn_poker with OpenSpiel's NashConv, save/restore, `marl league`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marl.cli import main
from marl.envs.base import EnvError
from marl.errors import ConfigError
from marl.population.meta_solvers import nash, prd, solve, uniform
from marl.policies.ratings import Ratings
from marl.algorithms.ppo import PPOConfig
from marl.population.psro import PSRO

RPS = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)


# -- ratings ----------------------------------------------------------------------------------

def test_ratings_move_with_results_and_fill_the_win_rate_matrix():
    r = Ratings(elo_k=20)
    for m in ("a", "b", "c"):
        r.add(m)
    for _ in range(10):
        r.record("a", "b", 1.0)
        r.record("b", "c", 1.0)
    r.record("a", "c", 0.5)
    assert r.elo["a"] > r.elo["b"] > r.elo["c"] and sum(r.elo.values()) == pytest.approx(3000.0)  # Elo is zero-sum
    assert r.ordinal("a") > r.ordinal("b") > r.ordinal("c")
    rates = r.win_rates()
    assert rates[0, 1] == 1.0 and rates[1, 0] == 0.0 and rates[0, 2] == 0.5 and np.isnan(rates[0, 0])
    assert r.games("a", "b") == 10 and [row["member"] for row in r.table()] == ["a", "b", "c"]
    metrics = r.log_point(3)
    assert set(metrics) == {"step"} | {f"league/{kind}/{m}" for kind in ("rating", "elo") for m in "abc"}
    r.add("a@snapshot", like="a")  # a snapshot starts from its source's ratings
    assert r.elo["a@snapshot"] == r.elo["a"] and r.skill["a@snapshot"] == r.skill["a"]


def test_ratings_state_round_trips_through_json_exactly():
    r = Ratings()
    r.add("x"), r.add("y")
    r.record("x", "y", 0.0)
    r.log_point(0)
    copy = Ratings.from_state(json.loads(json.dumps(r.get_state())))
    assert copy.get_state() == r.get_state()
    copy.record("x", "y", 1.0), r.record("x", "y", 1.0)
    assert copy.get_state() == r.get_state()  # and goes on identically


@pytest.mark.parametrize("call, message", [
    (lambda r: r.record("x", "nobody", 1.0), r"match result for 'nobody', which is not a rated member; members: \['x', 'y'\]"),
    (lambda r: r.record("x", "y", 2.0), r"a match score must be 1 \(win\), 0.5 \(draw\) or 0 \(loss\), got 2.0"),
    (lambda r: r.add("x"), r"population member 'x' is already rated"),
    (lambda r: Ratings(elo_k=0), r"elo_k must be a number in \(0, 400\], got 0"),
])
def test_bad_rating_input_is_one_line(call, message):
    r = Ratings()
    r.add("x"), r.add("y")
    with pytest.raises(ConfigError, match=message):
        call(r)


# -- meta-solvers -----------------------------------------------------------------------------

def test_nash_of_rock_paper_scissors_is_uniform_and_a_dominated_member_gets_nothing():
    assert nash(RPS) == pytest.approx([1 / 3] * 3, abs=1e-6)
    # member 3 loses to everyone: no weight; the rest is still rock-paper-scissors
    four = np.pad(RPS, ((0, 1), (0, 1)))
    four[3, :3], four[:3, 3] = -0.5, 0.5
    assert nash(four) == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0.0], abs=1e-6)
    biased = np.array([[0, -1, 2], [1, 0, -1], [-2, 1, 0]], dtype=float)  # paper wins double against rock
    x = nash(biased)
    assert x @ biased == pytest.approx([0.0] * 3, abs=1e-6) and x == pytest.approx([0.25, 0.5, 0.25], abs=1e-6)


def test_projected_replicator_dynamics_and_uniform():
    assert prd(RPS) == pytest.approx([1 / 3] * 3, abs=0.02)
    dominant = np.array([[0, 1, 1], [-1, 0, 0.2], [-1, -0.2, 0]], dtype=float)
    assert prd(dominant)[0] > 0.95
    assert uniform(RPS).tolist() == [1 / 3] * 3 and solve("uniform", [[0.0]]).tolist() == [1.0]


@pytest.mark.parametrize("args, message", [
    (("nash", [[0.0, 1.0], [1.0, 0.0]]), r"not zero-sum \(max \|A \+ A\^T\| = 2\); use meta_solver 'prd' or 'uniform'"),
    (("nash", np.zeros((0, 0))), r"a meta-solver needs a square, non-empty payoff table \(the population\); got shape \(0, 0\)"),
    (("prd", [[0.0, np.nan], [0.0, 0.0]]), r"missing \(NaN\) or infinite entries"),
    (("best", RPS), r"unknown meta_solver 'best'; allowed: \['nash', 'prd', 'uniform'\]"),
])
def test_bad_meta_solver_input_is_one_line(args, message):
    with pytest.raises(ConfigError, match=message):
        solve(*args)


# -- PSRO on kuhn_poker ---------------------------------------------------------------------------



def kuhn_config(lr: float = 1e-2, seed: int = 0, hiddens=(64,), batch: int = 1024) -> PPOConfig:
    """PPO best responses on kuhn_poker: relu (with tanh the best responses to a mixture plateau, docs/population.md)."""
    return (PPOConfig().environment("openspiel.kuhn_poker")
            .env_runners(num_envs_per_env_runner=16, rollout_fragment_length=32, batch_mode="complete_episodes")
            .training(train_batch_size=batch, minibatch_size=256, num_epochs=4, lr=lr, entropy_coeff=0.0, gamma=1.0,
                      gae_lambda=1.0)
            .multi_agent(policies={"main": {"model": {"hiddens": list(hiddens), "activation": "relu"}}}).debugging(seed=seed))


@pytest.mark.slow
def test_psro_with_learned_best_responses_brings_kuhn_poker_below_nash_conv_0_05_and_a_frozen_one_does_not():
    """The issue's target with *learned* best responses: PPO (relu [128, 128], 20 iterations x 2048 steps from a fresh
    initialisation each epoch) against the Nash mixture of exact payoffs, NashConv by OpenSpiel: from ~0.7 to below
    0.05 within 8 epochs (measured 0.038, seeds 1 and 2: 0.043 and 0.019 at epoch 7). The same with tanh (PPO's default)
    stays above 0.11, and with lr=0 (a best response that never learns) near uniform random's 0.9."""
    psro = PSRO(kuhn_config(lr=3e-3, hiddens=[128, 128], batch=2048), iterations_per_epoch=20, payoffs="exact")
    curve = [psro.step()["psro/nash_conv"] for _ in range(8)]
    frozen = PSRO(kuhn_config(lr=0.0), iterations_per_epoch=5, payoffs="exact")
    frozen_curve = [frozen.step()["psro/nash_conv"] for _ in range(2)]
    assert curve[0] > 0.5 and curve[-1] < 0.05, curve
    assert min(frozen_curve) > 0.8, frozen_curve
    assert len(psro.members) == 9 and psro.meta.sum() == pytest.approx(1.0)
    assert np.allclose(psro.payoffs, -psro.payoffs.T)  # zero-sum, seats averaged
    assert psro.ratings.games("main@8", "main@0") == 200  # exact payoffs, and the matches still rate the members


def test_psro_matches_fill_the_payoff_table_and_rate_members_and_save_restore_goes_on_identically(tmp_path):
    psro = PSRO(kuhn_config(), iterations_per_epoch=2, match_episodes=40, meta_solver="prd")
    result = psro.step()
    assert result["psro/population"] == 2 and 0.0 < result["psro/nash_conv"] < 2.0
    assert {"league/rating/main@0", "league/rating/main@1", "league/elo/main@1", "psro/meta/main@1"} <= set(result)
    assert psro.ratings.games("main@1", "main@0") == 40  # every match of the new member rated it
    assert np.allclose(psro.payoffs, -psro.payoffs.T)
    psro.save(tmp_path / "population")
    restored = PSRO(kuhn_config(), iterations_per_epoch=2, match_episodes=40, meta_solver="prd")
    restored.restore(tmp_path / "population")
    assert restored.payoffs.tolist() == psro.payoffs.tolist() and restored.meta.tolist() == psro.meta.tolist()
    assert restored.ratings.get_state() == psro.ratings.get_state() and restored.history == psro.history
    assert all(a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a) for a, b in zip(restored.weights, psro.weights))
    assert restored.nash_conv() == pytest.approx(psro.nash_conv(), abs=1e-12)
    # one more epoch from each: the same best response, payoffs, meta-strategy, ratings and report
    ahead, again = psro.step(), restored.step()
    clockless = [{k: v for k, v in row.items() if k != "psro/epoch_seconds"} for row in (ahead, again)]
    assert clockless[0] == clockless[1] and again["psro/population"] == 3
    assert restored.payoffs.tolist() == psro.payoffs.tolist() and restored.meta.tolist() == psro.meta.tolist()
    assert restored.ratings.get_state() == psro.ratings.get_state()
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(restored.weights, psro.weights) for k in a)
    assert restored.step()["psro/epoch"] == 2

    # `marl league`: a run directory with population/ inside, files beside population.json
    assert main(["league", str(tmp_path)]) == 0
    written = [tmp_path / "population" / name for name in ("ratings.md", "payoffs.png", "ratings.png")]
    assert all(p.stat().st_size for p in written) and "| main@0 |" in written[0].read_text()


def test_marl_league_on_a_folder_without_a_population_is_one_line(tmp_path, capsys):
    assert main(["league", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"marl: error: {tmp_path} holds no population.json (written by PSRO.save, or under population/ of a run "
                   "directory) and no league checkpoint (checkpoint/ of a multi_agent.league run)")


@pytest.mark.parametrize("kwargs, message", [
    ({"meta_solver": "best"}, r"psro.meta_solver must be one of \['nash', 'prd', 'uniform'\], got 'best'"),
    ({"payoffs": "guess"}, r"psro.payoffs must be one of \['matches', 'exact'\], got 'guess'"),
    ({"iterations_per_epoch": 0}, r"psro.iterations_per_epoch must be an integer >= 1, got 0"),
    ({"match_episodes": 1}, r"psro.match_episodes must be an integer >= 2, got 1"),
    ({"match_episodes": 41}, r"psro.match_episodes must be even \(half the matches in each seat\), got 41"),
    ({"warm_start": "yes"}, r"psro.warm_start must be true or false, got 'yes'"),
    ({"policy": "hero"}, r"psro trains one declared policy, psro.policy='hero'; multi_agent.policies declares \['main'\]"),
])
def test_bad_psro_settings_are_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        PSRO(kuhn_config(), **kwargs)


def test_psro_refuses_an_unknown_game_and_a_general_sum_game_for_the_nash_lp_before_training():
    def config(env):
        return PPOConfig().environment(env).multi_agent(policies={"main": {}})

    with pytest.raises(EnvError, match=r"^unknown OpenSpiel game 'kuhn_pokr' \(env 'openspiel.kuhn_pokr'\); did you mean kuhn_poker") as err:
        PSRO(config("openspiel.kuhn_pokr"))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^psro.meta_solver 'nash' solves two-player zero-sum games; 'openspiel.matrix_pd' "
                                          r"is general-sum with 2 players: use meta_solver 'prd' or 'uniform'$"):
        PSRO(config("openspiel.matrix_pd"))
    assert PSRO(config("openspiel.matrix_pd"), meta_solver="prd").meta_solver == "prd"  # its own solvers are fine


def test_an_empty_population_is_one_line(tmp_path, capsys):
    from marl.population.psro import MixtureMapping

    with pytest.raises(ConfigError, match=r"^the population is empty: a best response needs at least one member to play against$"):
        MixtureMapping("main", [], [])
    with pytest.raises(ConfigError, match=r"a meta-strategy gives each of the 2 members a weight >= 0, not all 0; got \[0.0, 0.0\]"):
        MixtureMapping("main", ["main@0", "main@1"], [0.0, 0.0])
    with pytest.raises(ConfigError, match=r"meta-strategy gives each of the 2 members .*got \[1.0\]"):
        MixtureMapping("main", ["main@0", "main@1"], [1.0])
    psro = PSRO(kuhn_config())
    with pytest.raises(ConfigError, match=r"^the population is empty: NashConv is of its members' mixture \(run a PSRO epoch first\)$"):
        psro.nash_conv()
    psro.save(tmp_path)  # a population saved before its first epoch: `marl league` says so
    assert main(["league", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"marl: error: {tmp_path / 'population.json'} holds an empty population (saved before its first PSRO epoch): "
                   "nothing to report")


def test_the_mixture_mapping_seats_the_policy_once_and_draws_opponents_by_the_meta_strategy():
    from collections import Counter

    from marl.data.episode import Episode
    from marl.population.psro import MixtureMapping

    mapping = MixtureMapping("main", ["main@0", "main@1", "main@2"], [0.25, 0.0, 0.75], seed=1)
    seats = Counter()
    for i in range(4000):
        episode = Episode(id=i, env_index=0)
        for agent in ("player_0", "player_1"):
            episode.bind(agent, mapping(agent, episode))
        seats[tuple(episode.policy_of.values())] += 1
    assert all(pair.count("main") == 1 for pair in seats)  # the trained policy in exactly one seat
    first = sum(n for pair, n in seats.items() if pair[0] == "main") / 4000
    against = Counter({m: sum(n for pair, n in seats.items() if m in pair) / 4000 for m in ("main@0", "main@1", "main@2")})
    assert 0.47 < first < 0.53 and against["main@1"] == 0 and 0.72 < against["main@2"] < 0.78
    again = Episode(id=7, env_index=3)
    assert mapping("player_0", again) == mapping("player_0", Episode(id=7, env_index=0))  # seeded by the episode id


def test_psro_with_openspiels_exact_best_response_reaches_nash_on_kuhn_poker():
    """The PSRO loop itself (payoff table, Nash LP, mixture, NashConv) with exact best responses: NashConv
    below 0.05 within 8 epochs (it reaches 0 on kuhn); fictitious play (uniform) is still above 0.15 then."""
    config = PPOConfig().environment("openspiel.kuhn_poker").multi_agent(policies={"main": {}})
    psro = PSRO(config, payoffs="exact", best_response="exact")
    nash_curve = [psro.step()["psro/nash_conv"] for _ in range(8)]
    fictitious = PSRO(config, payoffs="exact", best_response="exact", meta_solver="uniform")
    uniform_curve = [fictitious.step()["psro/nash_conv"] for _ in range(8)]
    assert nash_curve[0] > 0.8 and min(nash_curve) < 0.05, nash_curve
    assert min(uniform_curve) > 0.15, uniform_curve
    with pytest.raises(ConfigError, match=r"best_response='exact' .* needs payoffs='exact'"):
        PSRO(config, best_response="exact")


def test_psro_takes_any_algorithm_as_its_best_response_dqn_members_are_greedy():
    from marl.algorithms.dqn import DQNConfig

    config = (DQNConfig().environment("openspiel.kuhn_poker").env_runners(num_envs_per_env_runner=8, rollout_fragment_length=8)
              .training(gamma=1.0, n_step=1, epsilon=[[0, 1.0], [1000, 0.05]], min_env_steps_per_iteration=500,
                        training_intensity=4, num_steps_sampled_before_learning_starts=200)
              .multi_agent(policies={"main": {"model": {"hiddens": [32]}}}).debugging(seed=0))
    psro = PSRO(config, iterations_per_epoch=2, payoffs="exact", match_episodes=20)
    result = psro.step()
    assert result["psro/population"] == 2 and 0.0 < result["psro/nash_conv"] < 2.0
    table = psro._table(1).action_probability_array
    assert set(np.unique(np.round(table, 9))) <= {0.0, 1.0}  # a Q-learner's member plays its greedy action: a pure strategy


# -- `marl graph`: the league's nodes and PSRO's loop ------------------------------------------------

def test_marl_graph_draws_the_league_nodes_between_learn_and_sync(tmp_path, capsys):
    png = tmp_path / "league.png"
    assert main(["graph", "scenarios/connect_four_league.yaml", "--output", str(png)]) == 0
    out = capsys.readouterr().out
    chain = ["learn --results--> league_matches", "league_matches --results--> league_snapshot",
             "league_snapshot --results--> matchmaking", "matchmaking --results--> sync_weights"]
    assert all(edge in out for edge in chain), out
    assert png.stat().st_size > 10_000


def test_marl_graph_psro_draws_the_loop_payoffs_meta_solver_best_response_add_evaluate(tmp_path, capsys):
    png = tmp_path / "psro.png"
    assert main(["graph", "scenarios/kuhn_poker_psro.yaml", "--psro", "psro.meta_solver=prd",
                 "psro.iterations_per_epoch=7", "--output", str(png)]) == 0
    out = capsys.readouterr().out
    cycle = ["payoff_table --> meta_solver", "meta_solver --> best_response", "best_response --> add_member",
             "add_member --> evaluate_payoffs", "evaluate_payoffs --> payoff_table", "meta_solver --> nash_conv"]
    assert all(edge in out for edge in cycle), out
    for step in ("meta-game payoff table", "meta-solver: prd", "best-response training against the mixture",
                 "PPO workflow 'ppo', 7 iterations: sample -> concat -> learn -> sync_weights -> report",
                 "add member", "evaluate new payoffs"):
        assert step in out, step
    assert png.stat().st_size > 10_000
    # the PSRO settings are the scenario's psro section, overrides checked key by key
    assert main(["graph", "scenarios/kuhn_poker_psro.yaml", "--psro", "psro.meta_solver=lp", "--no-png"]) == 2
    assert capsys.readouterr().err.strip() == "marl: error: command line: 'psro.meta_solver' must be one of ['nash', 'prd', 'uniform'], got 'lp'"
    assert main(["graph", "scenarios/kuhn_poker_psro.yaml", "--psro", "psro.rounds=3", "--no-png"]) == 2
    assert capsys.readouterr().err.strip().startswith("marl: error: command line: unknown key 'psro.rounds'; valid keys of 'psro': [")
