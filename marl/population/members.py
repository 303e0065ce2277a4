"""A population member as something that plays: its module rebuilt from saved weights and matches
between members (`marl.runners.matches`, which the league's rating matches share), and
(OpenSpiel games) the member as an OpenSpiel tabular policy.

Modules are built on demand from the weights the population keeps (NumPy state dicts) and dropped
after use, so a population of many members holds weights, not live networks.
"""

from __future__ import annotations

import numpy as np

from marl.errors import ConfigError
from marl.runners.matches import play_matches
from marl.workflow.member_modules import MemberFactory, action_probabilities

__all__ = ["MemberFactory", "action_probabilities", "play_matches", "tabular_policy", "mixture_nash_conv",
           "uniform_table", "exact_best_response", "exact_payoffs"]


def tabular_policy(game, module):
    """The member as an OpenSpiel `TabularPolicy` of `game`: its probabilities at every information state."""
    from open_spiel.python import policy as openspiel_policy

    table = openspiel_policy.TabularPolicy(game)
    if not game.get_type().provides_information_state_tensor:
        raise ConfigError(f"{game} has no information-state tensor: its members cannot be turned into tabular policies")
    obs = np.asarray([s.information_state_tensor(s.current_player()) for s in table.states], np.float32)
    table.action_probability_array[:] = action_probabilities(module, obs, table.legal_actions_mask)
    return table


def _mixture(game, tables: list, weights):
    """The behaviour policy of playing member k with probability weights[k] for the whole game (OpenSpiel's aggregate)."""
    from open_spiel.python.algorithms import policy_aggregator

    if not tables:
        raise ConfigError("the population is empty: its mixture has no member to play")
    players = list(range(game.num_players()))
    weights = [float(w) for w in weights]
    return policy_aggregator.PolicyAggregator(game).aggregate(players, [tables] * len(players), [weights] * len(players))


def mixture_nash_conv(game, tables: list, weights) -> float:
    """NashConv of the population's mixture (each player plays member k with probability weights[k])."""
    from open_spiel.python.algorithms import exploitability

    return float(exploitability.nash_conv(game, _mixture(game, tables, weights)))


def uniform_table(game):
    from open_spiel.python import policy as openspiel_policy

    return openspiel_policy.TabularPolicy(game)


def exact_best_response(game, tables: list, weights) -> np.ndarray:
    """Action probabilities (TabularPolicy layout) of OpenSpiel's best response to the mixture, in every seat."""
    from open_spiel.python.algorithms import best_response

    mixture = _mixture(game, tables, weights)
    responders = [best_response.BestResponsePolicy(game, p, mixture) for p in range(game.num_players())]
    table = uniform_table(game)
    for i, state in enumerate(table.states):
        probs = responders[state.current_player()].action_probabilities(state)
        table.action_probability_array[i] = 0.0
        for action, p in probs.items():
            table.action_probability_array[i, action] = p
    return table.action_probability_array


def exact_payoffs(game, table_a, table_b) -> tuple[float, float]:
    """Expected returns of A and of B when they meet, seats averaged over player_0 and player_1 (two-player games)."""
    from open_spiel.python.algorithms import expected_game_score

    root = game.new_initial_state()
    a_first = expected_game_score.policy_value(root, [table_a, table_b])
    b_first = expected_game_score.policy_value(root, [table_b, table_a])
    return 0.5 * float(a_first[0] + b_first[1]), 0.5 * float(a_first[1] + b_first[0])
