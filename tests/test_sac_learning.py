"""SAC learns from tuned scenarios: each run stops as soon as it reaches its threshold (slow tests).

The defaults of SAC (Pendulum-v1; CartPole-v1, seeds 0-2), TD3, MASAC and MADDPG on their canonical tasks:
tests/test_defaults_learn.py. TD3 on Pendulum-v1 is that test's alone: scenarios/pendulum_td3.yaml sets TD3's
defaults (seed 0 aside), and its test here (-250 within 30k, seed 0) claimed less than the defaults test does
(-250 within 12k, seed 1; training.actor_lr=0 there: -1293 at 12k, 2026-11-29)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

import marl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

pytestmark = pytest.mark.slow


def train_until(config, threshold: float, max_env_steps: int, what: str) -> float:
    """Trains until the iteration's mean episode return reaches `threshold`; fails past `max_env_steps`."""
    algo = config.build()
    best = -math.inf
    try:
        while True:
            result = algo.train()
            value = result.get("episode_return_mean", math.nan)
            if not math.isnan(value):
                best = max(best, value)
            if best >= threshold:
                return best
            if result["env_steps_total"] >= max_env_steps:
                pytest.fail(f"{what} reached only {best:.1f} (needs {threshold}) in {result['env_steps_total']} env steps")
    finally:
        algo.stop()


def test_discrete_sac_cartpole_reaches_450_within_100k_env_steps():
    """Discrete SAC (scenarios/cartpole_sac.yaml, seed 1): the mean return of one iteration's training episodes
    (sampled from the stochastic policy, as DQN's CartPole tests) reaches 450. Random play: ~22. Measured
    on a loaded machine: seed 1 at 15k env steps, seed 2 at 26k, seed 0 peaked at 448 by 44k."""
    train_until(marl.load_scenario(ROOT / "scenarios/cartpole_sac.yaml"), 450, 100_000, "discrete SAC on CartPole-v1")


def test_two_agent_pendulum_summed_return_reaches_minus_500_within_40k_env_steps():
    """Two independent pendulums, each agent mapped to its own policy (RLlib's CI: -800 within 500k), with
    scenarios/pendulum_sac.yaml's settings: the scenario's test (a single pendulum at -250 within 20k, ~45 s
    beside this one's ~100 s) is this one's half, and SAC's defaults on one pendulum are the defaults test's."""
    from tests.two_pendulums import register

    config = (
        marl.load_scenario(ROOT / "scenarios/pendulum_sac.yaml")
        .environment(register())
        .multi_agent(policies=["p0", "p1"], policy_mapping_fn={"pendulum_0": "p0", "pendulum_1": "p1"})
    )
    train_until(config, -500, 40_000, "SAC on two pendulums (summed)")
