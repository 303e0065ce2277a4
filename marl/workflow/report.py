"""The result dict of one iteration: counters, episode metrics, losses, throughput.

Names are namespaced CleanRL-style (`losses/<policy>/...`, `perf/...`,
`env_runners/...`, `counters/...`) plus the flat keys users compare against
RLlib (`episode_return_mean`, `env_steps_total`, ...).
`episode_return_mean` is the mean over the episodes that finished in this
iteration (NaN if none did). With `stop.episode_return_window` N > 0,
`episode_return_window_mean` is the mean over the last N episodes that finished,
across iterations: RLlib's rule (its `metrics_num_episodes_for_smoothing`, 100 by default).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from marl.execution import metrics as m


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def average_results(items: list) -> dict[str, dict[str, float]]:
    """Per-policy learner stats averaged over an iteration's updates (`LearnResults.stats`: scalars only)."""
    sums: dict[str, dict[str, float]] = {}
    counts: dict[str, int] = {}
    for results in items:
        for pid, stats in results.stats.items():
            counts[pid] = counts.get(pid, 0) + 1
            acc = sums.setdefault(pid, {})
            for key, value in stats.items():
                if isinstance(value, (int, float, np.number)) or (isinstance(value, np.ndarray) and value.ndim == 0):
                    acc[key] = acc.get(key, 0.0) + float(value)
    out = {}
    for pid, acc in sums.items():
        out[pid] = {k: v / counts[pid] for k, v in acc.items()}
        for key in ("num_sgd_steps", "agent_steps_trained"):  # totals, not means
            if key in acc:
                out[pid][key] = int(acc[key])
    return out


class ResultBuilder:
    def __init__(self, ctx):
        self.ctx = ctx
        self.time_total_s = 0.0
        self.episodes_total = 0
        self.last_env_steps = 0
        self.last_agent_steps = 0
        self.timer_totals: dict[str, float] = {}
        self.window = int(getattr(ctx.config.stop_cfg, "episode_return_window", 0) or 0)
        self.recent_returns: deque = deque(maxlen=max(self.window, 1))

    def get_state(self) -> dict:
        return {"time_total_s": self.time_total_s, "episodes_total": self.episodes_total,
                "last_env_steps": self.last_env_steps, "last_agent_steps": self.last_agent_steps,
                "recent_returns": list(self.recent_returns)}

    def set_state(self, state: dict) -> None:
        self.time_total_s = float(state["time_total_s"])
        self.episodes_total = int(state["episodes_total"])
        self.recent_returns.extend(float(r) for r in state.get("recent_returns", ()))  # (absent in older checkpoints)
        self.last_env_steps = int(state["last_env_steps"])
        self.last_agent_steps = int(state["last_agent_steps"])

    def build(self, items: list, started: float, now: float) -> dict:
        """The iteration's result from the `LearnResults` it pulled (SKIPs left out) and the shared metrics."""
        learner_results = average_results(items)
        metrics = self.ctx.metrics
        c = metrics.counters
        iter_time = now - started
        self.time_total_s += iter_time
        episodes = metrics.drain_episodes()
        self.episodes_total += len(episodes)
        env_steps = c[m.ENV_STEPS_SAMPLED]
        agent_steps = c[m.AGENT_STEPS_SAMPLED]
        env_steps_iter = env_steps - self.last_env_steps
        self.last_env_steps, self.last_agent_steps = env_steps, agent_steps

        result: dict = {
            "env_steps_total": env_steps,
            "agent_steps_total": agent_steps,
            "env_steps_trained_total": c[m.ENV_STEPS_TRAINED],
            "episode_return_mean": _mean([e["return"] for e in episodes]),
            "episode_return_min": float(min((e["return"] for e in episodes), default=math.nan)),
            "episode_return_max": float(max((e["return"] for e in episodes), default=math.nan)),
            "episode_len_mean": _mean([e["length"] for e in episodes]),
            "episodes_this_iter": len(episodes),
            **({"episode_return_window_mean": self._window_mean(episodes)} if self.window else {}),
            "episodes_total": self.episodes_total,
            "time_this_iter_s": iter_time,
            "time_total_s": self.time_total_s,
            "env_steps_this_iter": env_steps_iter,
            "env_steps_per_s": env_steps_iter / iter_time if iter_time > 0 else math.nan,
            "weights_version": c[m.WEIGHTS_VERSION],
        }
        policy_returns: dict[str, list[float]] = {}
        for e in episodes:
            for pid, ret in e["policy_returns"].items():
                policy_returns.setdefault(pid, []).append(ret)
        for pid in self.ctx.config.policy_specs():
            result[f"policy_return_mean/{pid}"] = _mean(policy_returns.get(pid, []))
        for name, value in sorted(c.items()):
            result[f"counters/{name}"] = value
        for pid, stats in learner_results.items():
            for key, value in stats.items():
                result[f"losses/{pid}/{key}"] = value
        for name, timer in metrics.timers.items():
            previous = self.timer_totals.get(name, 0.0)
            result[f"perf/{name}_time_s"] = timer.total_s - previous
            self.timer_totals[name] = timer.total_s
        for results in items:  # what operators add to the iteration's result (self-play scores): latest wins
            result.update(results.extra)
        lag = [v for results in items for v in results.policy_lags]
        if lag:
            result["perf/policy_lag_mean"] = float(np.mean(lag))
            result["perf/policy_lag_max"] = int(max(lag))
        return result

    def _window_mean(self, episodes: list) -> float:
        self.recent_returns.extend(e["return"] for e in episodes)
        return _mean(self.recent_returns)
