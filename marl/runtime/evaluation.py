"""Evaluation: episodes on runners of their own, apart from the training runners.

The evaluation runners are an `EnvRunnerGroup` built from the config's
`evaluation` section: `evaluation_num_env_runners` remote actors (0: one
in-process runner), the env config merged with `evaluation_config`, seeds of
their own (worker indices from `EVALUATION_FIRST_INDEX`), and the same
restart-on-failure as the training runners. They never touch the training
runners' envs or random streams, so evaluating does not change what
training does. `start()` sends the current weights and launches the
episodes; `collect()` waits for them: with remote runners, training can run
in between (`evaluation_parallel_to_training`).

In a self-play run the results also score the trained policy's games
(`evaluation/self_play/win_rate`, `draw_rate`, `loss_rate`, `games`): against
the pool, or against `self_play.evaluation_opponent` when one is named.

`Evaluation` is what a run holds: its evaluation runners, built on first use
(by the graph's `evaluate` node or by `Algorithm.evaluate()`), and the
runners of any other fixed opponent asked for; their states go into checkpoints.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from marl.policies.self_play import score
from marl.runners import EnvRunnerGroup

EVALUATION_FIRST_INDEX = 1_000
EPISODE_RETURNS = "evaluation/episode_returns"  # lists, one value per episode, in the order they finished
EPISODE_LENGTHS = "evaluation/episode_lengths"


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal shares (the first ones one larger)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class Evaluator:
    def __init__(self, config, policy_ids: list[str]):
        self.cfg = config.evaluation_cfg
        self.policy_ids = list(policy_ids)
        self.self_play = config.seated_pool()  # self-play's pool or a league: its `policy` is scored
        self.group = EnvRunnerGroup(config.evaluation_runner_config(), first_index=EVALUATION_FIRST_INDEX)
        self._launched = None

    def start(self, weights: dict, duration: int | None = None, unit: str | None = None, explore: bool | None = None,
              exploration_step: int = 0):
        """Syncs `weights` (modules and connector state) and launches one evaluation.

        `exploration_step` (the run's env steps sampled) puts exploration schedules such as
        DQN's epsilon where training has them, so sampled evaluation explores as training does.
        """
        duration = self.cfg.evaluation_duration if duration is None else int(duration)
        unit = unit or self.cfg.evaluation_duration_unit
        explore = self.cfg.evaluation_explore if explore is None else bool(explore)
        if duration < 1:
            raise ValueError(f"evaluation duration must be >= 1, got {duration}")
        self.group.sync_weights(weights)
        started = time.perf_counter()
        if self.group.is_local:
            self._launched = (started, weights["version"], [self.group.call_local("run_evaluation", duration, unit, explore, exploration_step)], None)
            return
        shares = split(duration, self.group.num_remote)
        calls = [(i, share) for i, share in enumerate(shares) if share > 0]
        refs = [
            (i, self.group.call_remote(i, "run_evaluation", share, unit, explore, exploration_step), (share, unit, explore, exploration_step))
            for i, share in calls
        ]
        self._launched = (started, weights["version"], None, refs)

    def collect(self) -> dict:
        """The launched evaluation's results, as `evaluation/...` keys."""
        if self._launched is None:
            raise RuntimeError("Evaluator.collect() without start()")
        started, version, outputs, refs = self._launched
        self._launched = None
        if refs is not None:
            outputs = [self.group.get_remote(i, ref, "run_evaluation", *args) for i, ref, args in refs]
        episodes = [e for out in outputs for e in out["episodes"]]
        returns = [e["return"] for e in episodes]
        result = {
            "evaluation/episode_return_mean": _mean(returns),
            "evaluation/episode_return_min": float(min(returns, default=math.nan)),
            "evaluation/episode_return_max": float(max(returns, default=math.nan)),
            "evaluation/episode_len_mean": _mean([e["length"] for e in episodes]),
            # every episode's return and length (result.jsonl keeps them: `marl report`'s marl-eval JSON)
            EPISODE_RETURNS: [float(r) for r in returns],
            EPISODE_LENGTHS: [int(e["length"]) for e in episodes],
            "evaluation/episodes": len(episodes),
            "evaluation/env_steps": int(sum(out["env_steps"] for out in outputs)),
            "evaluation/weights_version": version,
            "evaluation/time_s": time.perf_counter() - started,
            "evaluation/runner_restarts": self.group.restarts,
        }
        for pid in self.policy_ids:
            values = [e["policy_returns"][pid] for e in episodes if pid in e["policy_returns"]]
            result[f"evaluation/policy_return_mean/{pid}"] = _mean(values)
        if self.self_play is not None:
            scores = [s for s in (score(e, self.self_play.policy) for e in episodes) if s is not None]
            result.update({
                "evaluation/self_play/games": len(scores),
                "evaluation/self_play/win_rate": _mean([s == 1.0 for s in scores]),
                "evaluation/self_play/draw_rate": _mean([s == 0.5 for s in scores]),
                "evaluation/self_play/loss_rate": _mean([s == 0.0 for s in scores]),
            })
        return result

    def get_states(self) -> list[dict]:
        return self.group.get_states()

    def set_states(self, states: list[dict]) -> None:
        self.group.set_states(states)

    def stop(self) -> None:
        self.group.stop()


class Evaluation:
    """A run's evaluation runners (an `Evaluator`), built on first use, and those of other fixed opponents."""

    def __init__(self, config, policy_ids: list[str]):
        self.config, self.policy_ids = config, list(policy_ids)
        self.built: Evaluator | None = None
        self._saved_states: list[dict] | None = None  # restored before the runners exist: applied when built
        self._opponents: dict[str, Evaluator] = {}

    def evaluator(self, opponent: str | None = None) -> Evaluator:
        """The evaluation runners; with `opponent` (self-play runs): runners whose opponent is that fixed policy."""
        sp = self.config.seated_pool()
        if opponent is not None and (sp is None or opponent != sp.evaluation_opponent):
            if sp is None:
                raise ValueError(f"evaluate(opponent={opponent!r}) needs a self-play run (multi_agent.self_play or multi_agent.league)")
            if opponent not in self._opponents:  # runners of its own, kept for the next call
                config = self.config.copy()
                setattr(config.multi_agent_cfg, getattr(sp, "section", "self_play"), dataclasses.asdict(sp.with_opponent(opponent)))
                self._opponents[opponent] = Evaluator(config, self.policy_ids)
            return self._opponents[opponent]
        if self.built is None:
            self.built = Evaluator(self.config, self.policy_ids)
            if self._saved_states:
                self.built.set_states(self._saved_states)
                self._saved_states = None
        return self.built

    def get_states(self) -> list[dict]:
        """The evaluation runners' states ([] when they were never built)."""
        return self.built.get_states() if self.built is not None else []

    def set_states(self, states: list[dict]) -> None:
        if self.built is not None:
            self.built.set_states(states)
        else:
            self._saved_states = states or None

    def stop(self) -> None:
        if self.built is not None:
            self.built.stop()
        for evaluator in self._opponents.values():
            evaluator.stop()
        self._opponents.clear()
