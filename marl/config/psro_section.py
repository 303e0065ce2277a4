"""The `psro` section of a scenario: PSRO (`marl.population.psro.PSRO`) around the scenario's algorithm.

A scenario with a `psro:` section is a PSRO run: `marl train` runs `epochs` PSRO epochs, each training a best
response (the scenario's algorithm, `iterations_per_epoch` iterations) against the population's meta-strategy
mixture, and logs one result row per epoch (`psro/...` keys); `marl graph` draws the PSRO loop. The section is
optional: a config without one has `psro_cfg = None` and trains as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.config.checks import doc

META_SOLVER_NAMES = ("nash", "prd", "uniform")  # marl.population.meta_solvers.META_SOLVERS (a test keeps them equal)
PAYOFF_SOURCES = ("matches", "exact")
BEST_RESPONSES = ("train", "exact")


def _even(value: int) -> str | None:
    return None if value % 2 == 0 else "must be even (half the matches in each seat)"


def _elo_k(value: float) -> str | None:
    return None if 0 < value <= 400 else "must be in (0, 400]"


@dataclass
class PSROSection:
    policy: str = doc("the one declared policy (multi_agent.policies) whose best responses become the members", "main")
    epochs: int = doc("`marl train`: PSRO epochs to run (each adds one member); `--resume` goes on up to it", 10, min=1)
    meta_solver: str = doc(
        "the meta-strategy over the payoff table: nash (linear programme, two-player zero-sum games only), "
        "prd (projected replicator dynamics), uniform (fictitious play)", "nash", choices=META_SOLVER_NAMES)
    iterations_per_epoch: int = doc("training iterations of each best response (its algorithm's `train()` calls)", 10, min=1)
    match_episodes: int = doc("evaluation matches between the new member and each member, half in each seat (so an even number)", 200,
                              min=2, check=_even)
    payoffs: str = doc("the payoff table from the matches, or exact from OpenSpiel tabular policies (small OpenSpiel "
                       "games; the matches are still played, for the ratings)", "matches", choices=PAYOFF_SOURCES)
    best_response: str = doc("train: the scenario's algorithm learns it; exact: OpenSpiel's exact best response "
                             "(needs payoffs: exact)", "train", choices=BEST_RESPONSES)
    warm_start: bool = doc("start each best response from the previous member's weights (else its own initialisation)", False)
    elo_k: float = doc("Elo K-factor of the members' ratings, in (0, 400]", 16.0, check=_elo_k)
    match_runners: int = doc("Ray actors that play the evaluation matches (0: in this process); a killed one is "
                             "replaced and its match played again", 0, min=0)

    def settings(self) -> dict:
        """PSRO's keyword arguments (every key but `epochs`, which the run loop reads)."""
        return {key: getattr(self, key) for key in self.__dataclass_fields__ if key != "epochs"}
