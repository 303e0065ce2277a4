"""OpenSpiel games as marl envs: `openspiel.<game>` with the game's parameters in `env_config`.

marl's own thin adapter over `pyspiel` rather than Shimmy's `OpenSpielCompatibilityV0`, which
puts the legal-action mask in `infos` (not the observation), prefers the observation tensor even
where the information-state tensor is what a poker policy needs, turns simultaneous moves into
turns, keeps the previous observation as the final one, reloads the game on every reset and
prints a blank line on an illegal action.

- Agents are `player_0 .. player_{n-1}`; each observation is PettingZoo's masked Dict
  `{"observation": float32 vector, "action_mask": int8 (num_distinct_actions,)}`, as connect four's.
  The vector is the information-state tensor where the game has one (perfect recall: kuhn_poker,
  leduc_poker), else the observation tensor, flattened (markov_soccer, connect_four).
  In a simultaneous-move game the vector ends with a one-hot of the player (its seat): there is no
  player to move that the state could reveal, and a shared tensor (markov_soccer's grid is the same
  for both players) would leave a policy that plays either seat unable to tell which goal is its own.
- Sequential games (`metadata["turn_based"]`): the observation dict names the player to act.
  Simultaneous-move games (markov_soccer, matrix games): every player with a legal move acts at
  once and the joint action is applied in one `apply_actions`.
- Chance nodes are sampled inside the env from its NumPy generator (seeded by `reset(seed)`).
- Rewards are the change of `state.returns()` at each step, for every player, acting or not.
  At a terminal state every player gets its final observation and `terminateds` all True.

`env_config` is checked against the game's own parameters (name and type) before pyspiel sees it,
so a bad key or value is one line naming what the game takes. `env.game` is the `pyspiel.Game`
(PSRO's NashConv reads it).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
import tempfile
from typing import Any

import gymnasium
import numpy as np

from marl.envs.base import ALL, AgentID, EnvError, InfoDict, MultiAgentEnv, ObsDict, StepResult

PREFIX = "openspiel."


def _pyspiel():
    try:
        import pyspiel
    except ImportError as err:
        raise EnvError(f"openspiel.* envs need OpenSpiel: pip install 'marl[openspiel]' ({err})") from None
    return pyspiel


def load_game(name: str, params: dict[str, Any] | None = None):
    """The `pyspiel.Game` `name` with `params`, each checked against the game's parameters first."""
    pyspiel = _pyspiel()
    env = f"{PREFIX}{name}"
    known = list(pyspiel.registered_names())
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `python -c 'import pyspiel; print(pyspiel.registered_names())'` lists them"
        raise EnvError(f"unknown OpenSpiel game {name!r} (env {env!r}){hint}")
    try:
        defaults = pyspiel.load_game(name).get_parameters()
    except pyspiel.SpielError as err:  # a game with required parameters and no defaults
        raise EnvError(f"env {env!r}: OpenSpiel cannot load the game with default parameters: {err}") from None
    params = dict(params or {})
    checked = {}
    for key, value in params.items():
        if key not in defaults:
            raise EnvError(f"env {env!r}: unknown env_config key {key!r}; the game's parameters: {sorted(defaults) or 'none'}")
        checked[key] = _typed(env, key, value, defaults[key])
    with _stderr_captured() as captured:  # pyspiel's C++ side prints a failed check to fd 2 before it raises
        try:
            return pyspiel.load_game(name, checked)
        except pyspiel.SpielError as err:
            failed = err
    reason = " ".join(captured["text"].replace("OpenSpiel exception:", "").split()) or str(failed).splitlines()[0]
    raise EnvError(f"env {env!r} rejected env_config {checked}: {reason}")


@contextlib.contextmanager
def _stderr_captured():
    """File descriptor 2 into a temporary file for the block; the yielded dict's "text" is what it caught."""
    sys.stderr.flush()
    saved = os.dup(2)
    captured = {"text": ""}
    with tempfile.TemporaryFile(mode="w+") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured["text"] = sink.read()


def _typed(env: str, key: str, value: Any, default: Any) -> Any:
    """`value` as the type of the game's default for `key` (an int where a float is due is widened)."""
    kind = type(default)
    if kind is bool:
        ok = isinstance(value, (bool, np.bool_))
    elif kind is int:
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise EnvError(f"env {env!r}: env_config[{key!r}] must be a {kind.__name__} (default {default!r}), got {value!r}")
    return kind(value)


class OpenSpielEnv(MultiAgentEnv):
    """One OpenSpiel game through marl's multi-agent protocol (see the module doc)."""

    def __init__(self, game_name: str, env_config: dict[str, Any] | None = None):
        pyspiel = _pyspiel()
        self.game = load_game(game_name, env_config)
        game_type = self.game.get_type()
        env = f"{PREFIX}{game_name}"
        if game_type.dynamics not in (pyspiel.GameType.Dynamics.SEQUENTIAL, pyspiel.GameType.Dynamics.SIMULTANEOUS):
            raise EnvError(f"env {env!r}: {game_type.dynamics} games are not multi-agent envs marl can run "
                           "(sequential and simultaneous-move games are)")
        if game_type.provides_information_state_tensor:
            self._tensor = "information_state_tensor"
            shape = self.game.information_state_tensor_shape()
        elif game_type.provides_observation_tensor:
            self._tensor = "observation_tensor"
            shape = self.game.observation_tensor_shape()
        else:
            raise EnvError(f"env {env!r}: the game has neither an information-state nor an observation tensor")
        self._sequential = game_type.dynamics == pyspiel.GameType.Dynamics.SEQUENTIAL
        self.num_actions = self.game.num_distinct_actions()
        self.possible_agents = [f"player_{p}" for p in range(self.game.num_players())]
        self.metadata = {"name": env, "turn_based": self._sequential}
        self._seat_one_hot = not self._sequential  # see the module doc
        size = int(np.prod(shape)) + (len(self.possible_agents) if self._seat_one_hot else 0)
        self._space = gymnasium.spaces.Dict({
            "observation": gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float32),
            "action_mask": gymnasium.spaces.Box(0, 1, (self.num_actions,), np.int8),
        })
        self._action_space = gymnasium.spaces.Discrete(self.num_actions)
        self.np_random = np.random.default_rng()
        self.state_ = None
        self._returns = np.zeros(len(self.possible_agents))

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        self._player(agent)
        return self._space

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        self._player(agent)
        return self._action_space

    def _player(self, agent: AgentID) -> int:
        try:
            return self.possible_agents.index(agent)
        except ValueError:
            raise EnvError(f"env {self.metadata['name']!r} has no agent {agent!r}; possible agents: {self.possible_agents}") from None

    # -- episode control ---------------------------------------------------

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state_ = self.game.new_initial_state()
        self._returns = np.zeros(len(self.possible_agents))
        self._resolve_chance()
        obs = self._observations()
        return obs, {a: {} for a in obs}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        state = self.state_
        if state is None or state.is_terminal():
            raise EnvError(f"env {self.metadata['name']!r}: step() called with no live agents; call reset() first")
        expected = self._actors()
        if set(actions) != set(expected):
            raise EnvError(f"env {self.metadata['name']!r}: expected actions for {expected} (the players to act), "
                           f"got actions for {list(actions)}")
        for agent, action in actions.items():
            if not self._legal(self._player(agent))[int(action)]:
                raise EnvError(f"env {self.metadata['name']!r}: action {int(action)} of {agent!r} is illegal here; "
                               f"legal: {np.flatnonzero(self._legal(self._player(agent))).tolist()}")
        if self._sequential:
            state.apply_action(int(actions[expected[0]]))
        else:  # a player without a legal move (none in its mask) passes OpenSpiel's "invalid" action 0
            joint = [int(actions.get(a, 0)) for a in self.possible_agents]
            state.apply_actions(joint)
        self._resolve_chance()
        returns = np.asarray(state.returns(), dtype=np.float64)
        rewards = {a: float(r) for a, r in zip(self.possible_agents, returns - self._returns)}
        self._returns = returns
        obs = self._observations()
        done = state.is_terminal()
        flags = {a: True for a in self.possible_agents} if done else {}
        return obs, rewards, {**flags, ALL: done}, {**{a: False for a in flags}, ALL: done}, {a: {} for a in obs}

    # -- helpers -----------------------------------------------------------

    def _resolve_chance(self) -> None:
        state = self.state_
        while state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes())
            state.apply_action(int(outcomes[self.np_random.choice(len(outcomes), p=np.asarray(probs) / sum(probs))]))

    def _actors(self) -> list[AgentID]:
        """The players to act now: the current player, or at a simultaneous node each one with a legal move."""
        state = self.state_
        if state.is_terminal():
            return []
        if state.is_simultaneous_node():
            return [a for p, a in enumerate(self.possible_agents) if state.legal_actions(p)]
        return [self.possible_agents[state.current_player()]]

    def _legal(self, player: int) -> np.ndarray:
        mask = np.zeros(self.num_actions, np.int8)
        if not self.state_.is_terminal():
            mask[self.state_.legal_actions(player)] = 1
        return mask

    def _observations(self) -> ObsDict:
        state = self.state_
        agents = self.possible_agents if state.is_terminal() else self._actors()
        return {a: {"observation": self._observation(self._player(a)), "action_mask": self._legal(self._player(a))}
                for a in agents}

    def _observation(self, player: int) -> np.ndarray:
        vector = np.asarray(getattr(self.state_, self._tensor)(player), np.float32)
        if not self._seat_one_hot:
            return vector
        seat = np.zeros(len(self.possible_agents), np.float32)
        seat[player] = 1.0
        return np.concatenate([vector, seat])

    def np_random_source(self):
        return self.np_random


def make_openspiel_env(name: str, env_config: dict[str, Any]) -> OpenSpielEnv:
    """`openspiel.<game>` -> its env (`env_config`: the game's parameters)."""
    return OpenSpielEnv(name[len(PREFIX):], env_config)
