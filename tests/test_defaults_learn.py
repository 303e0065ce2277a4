"""A user's first try learns: `marl train --algo X --env CartPole-v1` with the algorithm's defaults alone.

Budgets (issue 13): PPO reaches a mean return of 450 within 150k env steps, APPO and IMPALA
within 300k (DQN's is in tests/test_dqn.py). Each run stops at the threshold.
"""

from __future__ import annotations

import pytest

from marl.algorithms import config_from_dict


def reach(algo_name: str, budget: int, threshold: float = 450.0) -> tuple[float, int]:
    algo = config_from_dict({"algo": algo_name, "environment": {"env": "CartPole-v1"}}, ["debugging.seed=1"]).build()
    try:
        while True:
            result = algo.train()
            score = result["episode_return_mean"]
            if score >= threshold or result["env_steps_total"] >= budget:
                return score, result["env_steps_total"]
    finally:
        algo.stop()


@pytest.mark.slow
@pytest.mark.parametrize("algo_name,budget", [("PPO", 150_000), ("APPO", 300_000), ("IMPALA", 300_000)])
def test_defaults_reach_450_on_cartpole(algo_name, budget):
    score, steps = reach(algo_name, budget)
    assert score >= 450, f"{algo_name}'s defaults reached {score:.1f} in {steps} env steps (budget {budget})"
