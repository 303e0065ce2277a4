"""The `psro` section of a scenario: typed and checked key by key, `marl train` runs PSRO epochs from it into a run
directory (result rows, population/), `--resume` goes on, `marl graph` draws its loop without --psro."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from marl.cli import main
from marl.config.psro_section import META_SOLVER_NAMES
from marl.config.compose import load_scenario
from marl.population.meta_solvers import META_SOLVERS
from marl.population.psro import PSRO

SCENARIO = "scenarios/kuhn_poker_psro.yaml"
SMALL = ["psro.epochs=2", "psro.iterations_per_epoch=1", "training.train_batch_size=256", "training.minibatch_size=128",
         "env_runners.num_envs_per_env_runner=8", "multi_agent.policies.main.model.hiddens=[32]"]


def test_the_scenarios_psro_section_is_typed_and_round_trips_through_config_yaml(tmp_path):
    config = load_scenario(SCENARIO)
    section = config.psro_cfg
    assert (section.epochs, section.meta_solver, section.iterations_per_epoch, section.payoffs) == (8, "nash", 20, "exact")
    psro = PSRO.from_config(config)
    assert (psro.meta_solver, psro.iterations_per_epoch, psro.payoff_source, psro.match_episodes) == ("nash", 20, "exact", 200)
    assert tuple(META_SOLVERS) == META_SOLVER_NAMES  # the section's choices are the solvers there are
    written = tmp_path / "config.yaml"
    OmegaConf.save(OmegaConf.create(config.to_dict()), written)
    assert load_scenario(written).psro_cfg == section
    plain = load_scenario("scenarios/connect_four_league.yaml")
    assert plain.psro_cfg is None and "psro" not in plain.to_dict()  # only a PSRO run has the section
    assert load_scenario(SCENARIO, ["psro.meta_solver=prd"]).psro_cfg.meta_solver == "prd"


@pytest.mark.parametrize("override, message", [
    ("psro.meta_solver=lp", "'psro.meta_solver' must be one of ['nash', 'prd', 'uniform'], got 'lp'"),
    ("psro.epochs=0", "'psro.epochs' must be >= 1, got 0"),
    ("psro.match_episodes=201", "'psro.match_episodes' must be even (half the matches in each seat), got 201"),
    ("psro.elo_k=0", "'psro.elo_k' must be in (0, 400], got 0.0"),
    ("psro.match_runners=-1", "'psro.match_runners' must be >= 0, got -1"),
    ("psro.warm_start=maybe", "'psro.warm_start' must be bool, got str 'maybe'"),
    ("psro.rounds=3", "unknown key 'psro.rounds'; valid keys of 'psro': ['best_response', 'elo_k', 'epochs', "
                      "'iterations_per_epoch', 'match_episodes', 'match_runners', 'meta_solver', 'payoffs', 'policy', "
                      "'warm_start']"),
])
def test_bad_psro_values_are_one_line_naming_the_key(tmp_path, capsys, override, message):
    assert main(["train", SCENARIO, override, "--output", str(tmp_path / "run"), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"marl: error: command line: {message}"  # where the value came from
    assert not (tmp_path / "run").exists()


def test_psro_settings_that_clash_are_refused_before_any_training(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", SCENARIO, "psro.best_response=exact", "psro.payoffs=matches", "--output", str(run), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == ("marl: error: psro.best_response='exact' (OpenSpiel's best response, "
                                               "a tabular member) needs payoffs='exact'")
    assert main(["train", SCENARIO, "psro.policy=hero", "--output", str(run), "--quiet"]) == 2
    assert "psro.policy='hero'; multi_agent.policies declares ['main']" in capsys.readouterr().err
    assert not run.exists()


def test_marl_train_runs_the_psro_epochs_and_resume_goes_on(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", SCENARIO, *SMALL, "--output", str(run), "--quiet"]) == 0
    rows = [json.loads(line) for line in (run / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2] and [r["psro/population"] for r in rows] == [2, 3]
    assert all(0.0 < r["psro/nash_conv"] < 2.0 for r in rows) and rows[1]["env_steps_total"] > rows[0]["env_steps_total"] > 0
    population = json.loads((run / "population" / "population.json").read_text())
    assert population["members"] == ["main@0", "main@1", "main@2"] and len(population["history"]) == 2
    assert main(["league", str(run)]) == 0  # the ratings table, payoff heat map and rating curves of the run
    assert (run / "population" / "ratings.md").read_text().count("| main@") == 3
    assert main(["train", "--resume", str(run), "psro.epochs=3", "--quiet"]) == 0
    rows = [json.loads(line) for line in (run / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3] and rows[2]["psro/population"] == 4


def test_marl_graph_draws_the_psro_loop_of_a_scenario_with_a_psro_section(capsys):
    assert main(["graph", SCENARIO, "--no-png"]) == 0
    out = capsys.readouterr().out
    assert "meta-solver: nash" in out and "PPO workflow 'ppo', 20 iterations" in out
