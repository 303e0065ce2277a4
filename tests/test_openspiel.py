"""OpenSpiel games as the `openspiel.<game>` env family: masked Dict observations, chance nodes inside
the env, simultaneous moves (markov_soccer), imperfect information (kuhn/leduc poker), game parameters
from env_config, bad names and parameters as one line."""

from __future__ import annotations

import numpy as np
import pytest

from marl.algorithms.ppo import PPOConfig
from marl.envs import EnvError, make_env

ALL = "__all__"


def play(env, seed, chooser):
    """One episode; returns the list of (obs, rewards, terminateds) of each step and the summed rewards."""
    obs, _ = env.reset(seed=seed)
    steps, totals = [obs], {a: 0.0 for a in env.possible_agents}
    while True:
        obs, rewards, terms, truncs, _ = env.step({a: chooser(o) for a, o in obs.items()})
        for a, r in rewards.items():
            totals[a] += r
        steps.append(obs)
        if terms[ALL]:
            assert truncs[ALL] and all(terms[a] for a in env.possible_agents)
            return steps, totals


def first_legal(o):
    return int(np.flatnonzero(o["action_mask"])[0])


def test_kuhn_poker_is_turn_based_with_masked_information_states_and_dealt_cards():
    env = make_env("openspiel.kuhn_poker")
    assert env.metadata == {"name": "openspiel.kuhn_poker", "turn_based": True}
    assert env.possible_agents == ["player_0", "player_1"]
    space = env.observation_space("player_0")
    assert space["observation"].shape == (11,) and space["action_mask"].shape == (2,)
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_0"]  # chance dealt the cards inside reset: the first bettor acts
    o = obs["player_0"]
    assert o["observation"].dtype == np.float32 and space.contains(o)
    assert o["observation"][:2].tolist() == [1.0, 0.0] and o["observation"][2:5].sum() == 1.0  # player bits, one card
    cards = set()
    for seed in range(30):
        steps, totals = play(env, seed, first_legal)  # pass, pass: the higher card wins 1
        assert [list(s) for s in steps] == [["player_0"], ["player_1"], ["player_0", "player_1"]]
        assert sorted(totals.values()) == [-1.0, 1.0]
        cards.add(int(np.argmax(steps[0]["player_0"]["observation"][2:5])))
    assert cards == {0, 1, 2}  # the deal is random across seeds ...
    a, b = play(env, 7, first_legal), play(env, 7, first_legal)
    assert a[1] == b[1] and all(np.array_equal(x["player_0"]["observation"], y["player_0"]["observation"])
                                for x, y in zip(a[0], b[0]) if "player_0" in x)  # ... and reproducible per seed


def test_a_bet_call_showdown_pays_two_and_rewards_reach_the_player_not_acting():
    env = make_env("openspiel.kuhn_poker")
    env.reset(seed=3)
    _, rewards, terms, _, _ = env.step({"player_0": 1})  # bet
    assert not terms[ALL] and rewards == {"player_0": 0.0, "player_1": 0.0}
    obs, rewards, terms, _, _ = env.step({"player_1": 1})  # call
    assert terms[ALL] and sorted(rewards.values()) == [-2.0, 2.0] and set(obs) == {"player_0", "player_1"}


def test_game_parameters_come_from_env_config():
    env = make_env("openspiel.kuhn_poker", {"players": 3})
    assert env.possible_agents == ["player_0", "player_1", "player_2"]
    _, totals = play(env, 0, first_legal)
    assert sum(totals.values()) == pytest.approx(0.0) and max(totals.values()) == 2.0
    leduc = make_env("openspiel.leduc_poker", {"suit_isomorphism": True})
    assert leduc.game.get_parameters()["suit_isomorphism"] is True
    assert leduc.observation_space("player_0")["action_mask"].shape == (3,)


def test_markov_soccer_moves_both_players_at_once():
    env = make_env("openspiel.markov_soccer", {"horizon": 20})
    assert env.metadata["turn_based"] is False
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"player_0", "player_1"} and obs["player_0"]["observation"].shape == (122,)
    # the grid (120 values) is the same for both players; the closing one-hot says whose seat this is
    np.testing.assert_array_equal(obs["player_0"]["observation"][:120], obs["player_1"]["observation"][:120])
    assert obs["player_0"]["observation"][120:].tolist() == [1, 0] and obs["player_1"]["observation"][120:].tolist() == [0, 1]
    with pytest.raises(EnvError, match=r"expected actions for \['player_0', 'player_1'\]"):
        env.step({"player_0": 0})
    steps, totals = play(env, 0, lambda o: 4)  # everyone stands still: the horizon ends a goalless draw
    assert len(steps) - 1 in (19, 20) and all(set(s) == {"player_0", "player_1"} for s in steps) and totals == {"player_0": 0.0, "player_1": 0.0}


def test_an_illegal_action_is_refused_naming_the_legal_ones():
    env = make_env("openspiel.connect_four", {"rows": 2, "columns": 3, "x_in_row": 2})
    env.reset(seed=0)
    env.step({"player_0": 0})
    env.step({"player_1": 0})  # column 0 is full now
    with pytest.raises(EnvError, match=r"action 0 of 'player_0' is illegal here; legal: \[1, 2\]"):
        env.step({"player_0": 0})


@pytest.mark.parametrize("name, config, message", [
    ("openspiel.kuhn_pokr", {}, r"unknown OpenSpiel game 'kuhn_pokr' .*did you mean kuhn_poker"),
    ("openspiel.kuhn_poker", {"foo": 1}, r"unknown env_config key 'foo'; the game's parameters: \['players'\]"),
    ("openspiel.kuhn_poker", {"players": "two"}, r"env_config\['players'\] must be a int \(default 2\), got 'two'"),
    ("openspiel.kuhn_poker", {"players": 1}, r"rejected env_config \{'players': 1\}: .*num_players_ = 1, kGameType.min_num_players = 2"),
    ("openspiel.mfg_crowd_modelling", {}, r"MEAN_FIELD games are not multi-agent envs"),
])
def test_bad_games_and_parameters_are_one_line(name, config, message, capfd):
    with pytest.raises(EnvError, match=message) as err:
        make_env(name, config)
    assert "\n" not in str(err.value)
    assert "OpenSpiel exception" not in capfd.readouterr().err  # pyspiel never saw the bad name/key/type


def test_ppo_self_play_trains_on_kuhn_poker_and_markov_soccer():
    for env, config in (("openspiel.kuhn_poker", {}), ("openspiel.markov_soccer", {"horizon": 8})):
        algo = (PPOConfig().environment(env, env_config=config).env_runners(num_envs_per_env_runner=4, rollout_fragment_length=16)
                .training(train_batch_size=128, minibatch_size=64, num_epochs=1)
                .multi_agent(policies={"main": {"model": {"hiddens": [16]}}}, self_play={"pool_size": 2})
                .debugging(seed=0).build())
        try:
            result = algo.train()
            assert result["env_steps_total"] > 0 and result["self_play/games"] > 0
        finally:
            algo.stop()


def test_marl_envs_lists_the_openspiel_games_marl_can_run():
    from marl.envs.catalog import openspiel_families

    names = openspiel_families()["openspiel"]
    assert {"openspiel.kuhn_poker", "openspiel.leduc_poker", "openspiel.markov_soccer"} <= set(names)
    assert "openspiel.mfg_crowd_modelling" not in names  # mean-field games are refused by the adapter
