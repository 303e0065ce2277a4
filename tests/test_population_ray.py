"""PSRO's evaluation matches over a runner group of match players: the same results as in-process, and none lost to a killed runner."""

from __future__ import annotations

import threading
import time

import pytest

from marl.population.psro import PSRO
from tests.actor_kill import kill_and_wait
from tests.bounds import HANG_S
from tests.test_population import kuhn_config


def kill_a_runner_mid_match(ray, psro: PSRO, killed: list, step_done: threading.Event) -> threading.Thread:
    """A thread that waits until PSRO's match runners hold a match, then kills the runner playing it; it gives up
    when the step it watches has ended (no match was seen in flight)."""

    def watch():
        while not step_done.is_set():
            group = psro._matches  # the match players' runner group
            in_flight = list(group.in_flight.values()) if group is not None else []
            if in_flight:
                index, call = in_flight[0]
                kill_and_wait(ray, group.remote[index])
                killed.append(call)
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_match_runner_killed_mid_match_loses_no_result_and_psro_matches_in_process_results(ray_session):
    """PSRO epochs with 2 match runners, one killed while it plays a match (600 kuhn episodes, a second or more):
    the killed match is played again on a replacement, so the payoff table, every pair's game count and the
    ratings equal those of the same epochs played in-process (same seeds) -- nothing missing, nothing twice."""
    settings = dict(iterations_per_epoch=1, match_episodes=1200, meta_solver="prd")
    at_home = PSRO(kuhn_config(batch=256), **settings)
    at_home.step()
    remote = PSRO(kuhn_config(batch=256), match_runners=2, **settings)
    killed: list = []
    step_done = threading.Event()
    watcher = kill_a_runner_mid_match(ray_session, remote, killed, step_done)
    try:
        remote.step()
        step_done.set()
        watcher.join(timeout=HANG_S)
        assert killed, "no match was in flight to kill"
        assert remote._matches.restarts == 1  # the killed runner held a match: it was replaced and the match replayed
        assert remote.payoffs.tolist() == at_home.payoffs.tolist()
        assert remote.ratings.games("main@1", "main@0") == 1200 == at_home.ratings.games("main@1", "main@0")
        assert remote.ratings.get_state() == at_home.ratings.get_state()
        assert remote.meta.tolist() == at_home.meta.tolist()
    finally:
        remote.stop()


def test_a_league_evaluation_runner_killed_mid_evaluation_loses_no_game(ray_session):
    """League evaluation games (the main agent against a random player) on 2 evaluation runners, one killed while
    it plays its share: the share is played again on its replacement, so the tally holds every game, once."""
    from tests.test_league import small_league

    config = small_league(evaluation_opponent="random").evaluation(evaluation_num_env_runners=2)
    algo = config.build()
    try:
        evaluator = algo.evaluation.evaluator()
        evaluator.start(algo.get_weights(), duration=400, unit="episodes")  # ~200 connect-four games per runner
        kill_and_wait(ray_session, evaluator.group.remote[0])
        result = evaluator.collect()
        assert evaluator.group.restarts == 1
        assert result["evaluation/episodes"] == 400 and result["evaluation/self_play/games"] == 400
        rates = [result[f"evaluation/self_play/{k}_rate"] for k in ("win", "draw", "loss")]
        assert sum(rates) == pytest.approx(1.0)
    finally:
        algo.stop()
