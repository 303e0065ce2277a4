"""PSRO (Lanctot et al. 2017) over any marl algorithm as the best-response learner.

A symmetric two-player population: every member plays either seat. One epoch:

1. **best response**: the scenario's algorithm trains its policy (`policy`, e.g. `main`) for
   `iterations_per_epoch` iterations against the population's meta-strategy mixture: each episode
   seats it first or second at random and draws the opponent, a frozen member `<policy>@k`, with
   the meta-strategy's probability `meta[k]` (`MixtureMapping`, seeded by the episode id);
2. **add**: the trained weights become member `<policy>@n`;
3. **payoffs**: the new member's row and column of the payoff table, filled by `match_episodes`
   evaluation matches against every member (half in each seat; `payoffs="matches"`), or exactly
   from the members' OpenSpiel tabular policies (`payoffs="exact"`, small OpenSpiel games; the
   matches are still played, for the ratings); every match moves the members' Elo and openskill
   ratings (`marl.policies.ratings`). `match_runners=N` plays them on N Ray actors
   (a runner group of `marl.runners.matches.MatchPlayer`s): the same returns as in-process, and a runner killed mid-match
   is replaced and its match played again, so no result is lost or counted twice;
4. **meta-solve**: `meta_solver` (`nash` LP, `prd`, `uniform`) over the payoff table;
5. **NashConv**: for OpenSpiel games with information states, OpenSpiel's
   `exploitability.nash_conv` of the meta-strategy mixture of the members' tabular policies.

`best_response="exact"` (OpenSpiel games, `payoffs="exact"`) takes OpenSpiel's exact best response to the
mixture instead of training one: the PSRO loop alone, the limit a learned best response approaches.

The `nash` meta-solver on an OpenSpiel game that is not two-player zero-sum is refused at construction,
before any best response trains. With PPO best responses use a relu network: tanh ones saturate into a
pure action before the card matters and plateau (docs/population.md has the measurements).

The population starts with one member, the policy's untrained initialisation. While a best response
trains, the frozen members act as members (`set_frozen_policies` on its runners): their inference
pass, sampled -- a DQN member its greedy action, not the learner's epsilon. `warm_start`
starts each best response from the previous member's weights (off by default: on kuhn_poker a warm start
from a near-deterministic member stays near it, and PSRO degenerates into iterated best response).
`save(dir)`/`restore(dir)` keep the members' weights, payoff table, meta-strategy, ratings and history,
so a run goes on where it stopped; `marl league DIR` draws what `save` wrote.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from marl.config.psro_section import BEST_RESPONSES, PAYOFF_SOURCES, PSROSection
from marl.envs import make_env
from marl.errors import ConfigError
from marl.population import members as mb
from marl.population.meta_solvers import META_SOLVERS, solve
from marl.policies.ratings import Ratings
from marl.execution.ray_init import ensure_ray
from marl.execution.user_code import job_runtime_env
from marl.runners import EnvRunnerGroup
from marl.runners.matches import MatchPlayer

TABLE = "__table__"  # a member that is an OpenSpiel tabular policy (best_response="exact"), not module weights


class MixtureMapping:
    """Seats `policy` in one seat (first or second at random) and a member drawn from `weights` in the other."""

    def __init__(self, policy: str, members: list[str], weights: list[float], seed: int = 0):
        if not members:
            raise ConfigError("the population is empty: a best response needs at least one member to play against")
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(members),) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ConfigError(f"a meta-strategy gives each of the {len(members)} members a weight >= 0, not all 0; "
                              f"got {list(weights)}")
        self.policy, self.members, self.weights, self.seed = policy, list(members), list(weights), seed

    def __call__(self, agent_id: str, episode) -> str:
        if episode is None:
            return self.policy
        rng = random.Random(f"{self.seed}/{episode.id}")
        policy_first = rng.random() < 0.5
        opponent = rng.choices(self.members, weights=self.weights)[0]
        bound = episode.policy_of
        if not bound:
            return self.policy if policy_first else opponent
        return opponent if self.policy in bound.values() else self.policy


class PSRO:
    def __init__(self, config, *, policy: str = "main", meta_solver: str = "nash", iterations_per_epoch: int = 10,
                 match_episodes: int = 200, payoffs: str = "matches", warm_start: bool = False, elo_k: float = 16.0,
                 best_response: str = "train", match_runners: int = 0):
        if meta_solver not in META_SOLVERS:
            raise ConfigError(f"psro.meta_solver must be one of {list(META_SOLVERS)}, got {meta_solver!r}")
        if payoffs not in PAYOFF_SOURCES:
            raise ConfigError(f"psro.payoffs must be one of {list(PAYOFF_SOURCES)}, got {payoffs!r}")
        if best_response not in BEST_RESPONSES:
            raise ConfigError(f"psro.best_response must be one of {list(BEST_RESPONSES)}, got {best_response!r}")
        if best_response == "exact" and payoffs != "exact":
            raise ConfigError("psro.best_response='exact' (OpenSpiel's best response, a tabular member) needs payoffs='exact'")
        for key, value, low in (("iterations_per_epoch", iterations_per_epoch, 1), ("match_episodes", match_episodes, 2),
                                ("match_runners", match_runners, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"psro.{key} must be an integer >= {low}, got {value!r}")
        if match_episodes % 2:
            raise ConfigError(f"psro.match_episodes must be even (half the matches in each seat), got {match_episodes}")
        if not isinstance(warm_start, bool):
            raise ConfigError(f"psro.warm_start must be true or false, got {warm_start!r}")
        declared = dict(config.multi_agent_cfg.policies or {})
        if policy not in declared or len(declared) != 1:
            raise ConfigError(f"psro trains one declared policy, psro.policy={policy!r}; multi_agent.policies declares {list(declared)}")
        if config.self_play() is not None:
            raise ConfigError("psro and multi_agent.self_play are two ways to pick opponents; set only one")
        self.config, self.policy, self.meta_solver = config, policy, meta_solver
        self.iterations_per_epoch, self.match_episodes, self.payoff_source = iterations_per_epoch, match_episodes, payoffs
        self.warm_start, self.best_response, self.match_runners = bool(warm_start), best_response, match_runners
        self.seed = int(config.debugging_cfg.seed or 0)
        self.weights: list[dict] = []  # member k's NumPy state dict
        self.payoffs = np.zeros((0, 0))
        self.meta = np.zeros(0)
        self.ratings = Ratings(elo_k=elo_k)
        self.history: list[dict] = []
        self.env_steps = 0
        self._game = None
        self._tables: dict[int, object] = {}
        self._matches = None  # the match runners (match_runners > 0), made on first use
        self._refs: dict[int, object] = {}  # member k's weights in the object store (match runners read them)
        if meta_solver == "nash" and config.environment_cfg.env.startswith("openspiel."):
            self._check_zero_sum()

    def _check_zero_sum(self) -> None:
        """The Nash LP's meta-game is zero-sum only if the game is: said before any best response trains."""
        game = self._openspiel_game()  # also names an unknown game or a bad parameter, in one line
        utility = game.get_type().utility
        if game.num_players() != 2 or utility.name != "ZERO_SUM":
            raise ConfigError(f"psro.meta_solver 'nash' solves two-player zero-sum games; {self.config.environment_cfg.env!r} "
                              f"is {utility.name.lower().replace('_', '-')} with {game.num_players()} players: "
                              f"use meta_solver 'prd' or 'uniform'")

    @classmethod
    def from_config(cls, config) -> "PSRO":
        """PSRO with the settings of the config's `psro` section (its defaults when it has none)."""
        section = config.psro_cfg if config.psro_cfg is not None else PSROSection()
        return cls(config, **section.settings())

    @property
    def members(self) -> list[str]:
        return [f"{self.policy}@{k}" for k in range(len(self.weights))]

    # -- one epoch ------------------------------------------------------------------------------
    def step(self) -> dict:
        """One PSRO epoch (the first also adds the initial member); returns the epoch's metrics."""
        start = time.perf_counter()
        if self.best_response == "exact":
            return self._exact_step(start)
        if not self.weights:
            algo = self._build([], [])
            try:
                self._factory = mb.MemberFactory(algo.config, self.policy, algo.policy_specs[self.policy])
                self._add(algo.get_weights()["modules"][self.policy])
            finally:
                algo.stop()
        algo = self._build(self.members, list(self.meta))
        try:
            weights = algo.get_weights()
            for name, w in zip(self.members, self.weights):
                weights["modules"][name] = w
            if self.warm_start:
                weights["modules"][self.policy] = self.weights[-1]
            weights["version"] += 1
            algo.learners.set_weights(weights)
            algo.sync_runners()
            # The members play their own strategies (a DQN member its greedy action), the best response explores.
            algo.runners.set_frozen_policies(self.members)
            result = {}
            for _ in range(self.iterations_per_epoch):
                result = algo.train()
            self.env_steps += int(result.get("env_steps_total", 0))
            self._add(algo.get_weights()["modules"][self.policy])
        finally:
            algo.stop()
        return self._report(result, time.perf_counter() - start)

    def _exact_step(self, start: float) -> dict:
        """An epoch whose best response is OpenSpiel's exact one to the mixture (the first member: uniform random).

        No learning: what it measures is the rest of PSRO (payoff table, meta-solver, mixture, NashConv), the
        limit a learned best response approaches."""
        game = self._openspiel_game()
        if not self.weights:
            self._add({TABLE: mb.uniform_table(game).action_probability_array})
        self._add({TABLE: mb.exact_best_response(game, [self._table(k) for k in range(len(self.weights))], self.meta)})
        return self._report({}, time.perf_counter() - start)

    def _build(self, opponents: list[str], weights: list[float]):
        config = self.config.copy()
        main = dict(config.multi_agent_cfg.policies[self.policy] or {})
        policies = {self.policy: main, **{m: {**main, "spaces_from": self.policy} for m in opponents}}
        mapping = MixtureMapping(self.policy, opponents, weights, self.seed + len(self.history)) if opponents else None
        config.multi_agent(policies=policies, policy_mapping=mapping, policies_to_train=[self.policy])
        config.debugging(seed=self.seed + 7919 * len(self.weights))  # each best response from its own initialisation
        return config.build()

    def _add(self, weights: dict) -> None:
        """Member n joins: its payoffs against every member (itself included), ratings, then the meta-strategy."""
        n = len(self.weights)
        self.weights.append({k: np.array(v, copy=True) for k, v in weights.items()})
        self.ratings.add(self.members[n])
        grown = np.zeros((n + 1, n + 1))
        grown[:n, :n] = self.payoffs
        new = None if TABLE in self.weights[n] else self._factory.module(self.weights[n])
        returns = self._match_returns(n, new)
        for k in range(n + 1):
            mine, theirs = self._payoff(n, k, new, returns.get(k))
            grown[n, k], grown[k, n] = (mine, theirs) if k != n else ((mine + theirs) / 2,) * 2
        self.payoffs = grown
        self.meta = solve(self.meta_solver, self.payoffs)

    def _match_returns(self, a: int, module_a) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Member a's and each member b's returns (b <= a) over their matches, half in each seat, and the ratings
        they move. In-process, or over the match runners (`match_runners`): the same seeds, the same returns.

        Matches between module members rate both (with exact payoffs too: ratings come from games);
        tabular members (exact best responses) play no matches and are not rated."""
        if TABLE in self.weights[a]:
            return {}
        others = [b for b in range(a + 1) if TABLE not in self.weights[b]]
        half = self.match_episodes // 2
        seeds = {b: self.seed * 1_000_003 + a * 1009 + b for b in others}
        if self.match_runners:
            group, ref, spec = self._match_group(), self._ref, self._factory.spec
            keys = [(b, seat) for seat in (0, 1) for b in others]
            calls = [(spec, ref(a), ref(b), half, seeds[b]) if seat == 0 else (spec, ref(b), ref(a), half, seeds[b] + 1)
                     for b, seat in keys]
            played = dict(zip(keys, group.map_calls("play", calls)))
        else:
            config, spec, weights = self._factory.config, self._factory.spec, self.weights
            played = {}
            for b in others:
                played[(b, 0)] = mb.play_matches(config, spec, (weights[a], weights[b]), half, seeds[b])
                played[(b, 1)] = mb.play_matches(config, spec, (weights[b], weights[a]), half, seeds[b] + 1)
        out = {}
        for b in others:
            first, second = played[(b, 0)], played[(b, 1)]
            mine, theirs = np.concatenate([first[:, 0], second[:, 1]]), np.concatenate([first[:, 1], second[:, 0]])
            if a != b:
                for m, t in zip(mine, theirs):
                    self.ratings.record(self.members[a], self.members[b], 1.0 if m > t else 0.5 if m == t else 0.0)
            out[b] = (mine, theirs)
        return out

    def _payoff(self, a: int, b: int, module_a, returns) -> tuple[float, float]:
        """Member a's and member b's expected returns when they meet (seats averaged): exact, or their matches'."""
        if self.payoff_source == "exact":
            return mb.exact_payoffs(self._openspiel_game(), self._table(a, module_a), self._table(b))
        mine, theirs = returns
        return float(mine.mean()), float(theirs.mean())

    def _match_group(self):
        if self._matches is None:
            config = self._factory.config.copy().env_runners(num_env_runners=self.match_runners)
            ensure_ray(runtime_env=job_runtime_env(config))
            self._matches = EnvRunnerGroup(config, runner_cls=MatchPlayer)
        return self._matches

    def _ref(self, k: int):
        """Member k's weights in the object store, put once and read by every match that plays it."""
        import ray

        if k not in self._refs:
            self._refs[k] = ray.put(self.weights[k])
        return self._refs[k]

    def stop(self) -> None:
        """Stops the match runners (if any); the population stays, and a later epoch starts new ones."""
        if self._matches is not None:
            self._matches.stop()
        self._matches = None
        self._refs.clear()

    def _openspiel_game(self):
        if self._game is None:
            env = make_env(self.config.environment_cfg.env, dict(self.config.environment_cfg.env_config))
            self._game = getattr(env, "game", None)
            env.close()
            if self._game is None:
                raise ConfigError(f"psro payoffs='exact' and NashConv need an OpenSpiel game (openspiel.<game>), "
                                  f"not {self.config.environment_cfg.env!r}")
        return self._game

    def _table(self, k: int, module=None):
        if k not in self._tables:
            game = self._openspiel_game()
            if TABLE in self.weights[k]:
                self._tables[k] = mb.uniform_table(game)
                self._tables[k].action_probability_array[:] = self.weights[k][TABLE]
            else:
                self._tables[k] = mb.tabular_policy(game, module or self._factory.module(self.weights[k]))
        return self._tables[k]

    def nash_conv(self) -> float | None:
        """NashConv of the meta-strategy mixture, where OpenSpiel computes it (None otherwise)."""
        if not self.config.environment_cfg.env.startswith("openspiel."):
            return None
        if not self.weights:
            raise ConfigError("the population is empty: NashConv is of its members' mixture (run a PSRO epoch first)")
        game = self._openspiel_game()
        if not game.get_type().provides_information_state_tensor:
            return None
        return mb.mixture_nash_conv(game, [self._table(k) for k in range(len(self.weights))], self.meta)

    def _report(self, result: dict, seconds: float) -> dict:
        epoch = len(self.history)
        out = {"psro/epoch": epoch, "psro/population": len(self.weights), "psro/best_response_env_steps": self.env_steps,
               "psro/epoch_seconds": seconds, **{f"psro/meta/{m}": float(p) for m, p in zip(self.members, self.meta)}}
        nash_conv = self.nash_conv()
        if nash_conv is not None:
            out["psro/nash_conv"] = nash_conv
        for key in ("env_runners/episode_return_mean",):
            if key in result:
                out[f"psro/best_response/{key}"] = result[key]
        out.update(self.ratings.log_point(epoch))
        self.history.append(out)
        return out

    # -- save / restore -------------------------------------------------------------------------
    def save(self, path) -> str:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        tmp = path / "members.safetensors.tmp"
        save_file({f"{k}/{name}": np.ascontiguousarray(v) for k, w in enumerate(self.weights) for name, v in w.items()}, str(tmp))
        os.replace(tmp, path / "members.safetensors")
        state = {"policy": self.policy, "meta_solver": self.meta_solver, "members": self.members,
                 "payoffs": self.payoffs.tolist(), "meta": self.meta.tolist(), "ratings": self.ratings.get_state(),
                 "history": self.history, "env_steps": self.env_steps}
        tmp = path / "population.json.tmp"
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, path / "population.json")
        return str(path)

    def restore(self, path) -> None:
        path = Path(path)
        state = json.loads((path / "population.json").read_text())
        flat = load_file(str(path / "members.safetensors"))
        self.weights = [{} for _ in state["members"]]
        for key, value in flat.items():
            k, name = key.split("/", 1)
            self.weights[int(k)][name] = value
        self.payoffs, self.meta = np.asarray(state["payoffs"], np.float64).reshape(len(self.weights), -1), np.asarray(state["meta"])
        self.ratings.set_state(state["ratings"])
        self.history, self.env_steps = list(state["history"]), int(state["env_steps"])
        self._tables.clear()
        self._refs.clear()
        if self.weights and self.best_response == "train":
            algo = self._build([], [])
            try:
                self._factory = mb.MemberFactory(algo.config, self.policy, algo.policy_specs[self.policy])
            finally:
                algo.stop()
