"""A population member as something that plays: its module rebuilt from saved weights, matches
between members on the dict path, and (OpenSpiel games) the member as an OpenSpiel tabular policy.

Modules are built on demand from the weights the population keeps (NumPy state dicts) and dropped
after use, so a population of many members holds weights, not live networks.
Members act by sampling their masked action distribution: a mixed strategy is what a poker
policy is, and its greedy action would be a different (more exploitable) policy.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.connectors import build_policy_module
from marl.envs import make_env
from marl.errors import ConfigError


def action_probabilities(module, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[rows, actions] probabilities of a categorical-policy module at observations `obs` with legal `mask`."""
    batch = {"obs": torch.as_tensor(np.asarray(obs, np.float32)), "action_mask": torch.as_tensor(np.asarray(mask, np.float32))}
    out = module.forward_inference(batch)
    logits = out.get("action_dist_inputs")
    if logits is None:
        raise ConfigError(f"population members need a categorical policy (a module with 'action_dist_inputs'); "
                          f"{type(module).__name__} returns {sorted(out)}")
    logits = logits.masked_fill(batch["action_mask"] < 0.5, float("-inf"))
    return torch.softmax(logits.double(), dim=-1).numpy()


class MemberFactory:
    """Builds the trained policy's module (the shape every member shares) and loads a member's weights into it."""

    def __init__(self, config, policy: str, spec):
        self.config, self.policy, self.spec = config, policy, spec

    def module(self, weights: dict):
        with torch.random.fork_rng(devices=[]):
            module = build_policy_module(self.config, self.policy, self.spec)
        module.set_state(weights)
        return module.eval()


def play_matches(config, modules: tuple, episodes: int, seed: int) -> np.ndarray:
    """[episodes, 2] returns of `modules[0]` seated as player_0 and `modules[1]` as player_1 (sampled play)."""
    env = make_env(config.environment_cfg.env, dict(config.environment_cfg.env_config), config.environment_cfg.wrappers)
    agents = list(env.possible_agents)
    if len(agents) != 2:
        raise ConfigError(f"population matches are two-player; env {config.environment_cfg.env!r} has agents {agents}")
    seat = dict(zip(agents, modules))
    rng = np.random.default_rng(seed)
    out = np.zeros((episodes, 2))
    try:
        for e in range(episodes):
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
            while True:
                actions = {}
                for agent, o in obs.items():
                    probs = action_probabilities(seat[agent], *_inputs(o, seat[agent]))[0]
                    actions[agent] = int(rng.choice(len(probs), p=probs))
                obs, rewards, terms, _, _ = env.step(actions)
                for i, agent in enumerate(agents):
                    out[e, i] += rewards.get(agent, 0.0)
                if terms["__all__"]:
                    break
    finally:
        env.close()
    return out


def _inputs(obs, module) -> tuple[np.ndarray, np.ndarray]:
    """One agent's observation as a row for the module: PettingZoo's masked Dict, or a plain array (all moves legal)."""
    if isinstance(obs, dict) and "observation" in obs and "action_mask" in obs:
        return np.asarray(obs["observation"], np.float32).reshape(1, -1), np.asarray(obs["action_mask"])[None]
    if not hasattr(module.action_space, "n"):
        raise ConfigError(f"population matches need discrete actions; the policy's action space is {module.action_space}")
    return np.asarray(obs, np.float32).reshape(1, -1), np.ones((1, module.action_space.n))


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
