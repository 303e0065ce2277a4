"""What the policy server accepts: where it may listen, which configs it can serve, and the checks of a request's
observations and steps (each refusal a `RequestError`: its HTTP status and one line saying what is wrong).

Its own module because checking what clients send is a job apart from keeping episodes and assembling
batches (`marl.external.server`) and from the HTTP layer (`marl.external.http_app`): every check of the wire
format's values is here. `ExperienceServer` inherits `RequestChecks`.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.modules.spaces import is_masked_space

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_host(host: str, token: str | None) -> None:
    """Serving beyond this machine needs a token (checked before anything starts)."""
    if host not in LOCAL_HOSTS and not token:
        raise ConfigError(
            f"serving on {host} (beyond this machine) needs a token: give --token or set MARL_SERVE_TOKEN; "
            "clients send it as 'Authorization: Bearer <token>'"
        )


def check_servable(config, specs: dict) -> None:
    """What `marl serve` cannot do yet, each as one line before anything starts: observations are taken as clients
    send them (flat numbers: no connectors, no observation filter, no action masks, no Dict/Tuple spaces), and
    there is no global env state (MAPPO's centralised critic) nor recurrent state (checked once modules exist)."""

    if config.connectors_cfg.env_to_module or config.connectors_cfg.policies or config.env_runners_cfg.observation_filter != "none":
        raise ConfigError("marl serve takes observations as clients send them: remove connectors.env_to_module, "
                          "connectors.policies and env_runners.observation_filter (it is "
                          f"'{config.env_runners_cfg.observation_filter}')")
    for pid, spec in specs.items():
        if is_masked_space(spec.observation_space):
            raise ConfigError(f"marl serve: policy '{pid}' observes an action mask ({config.environment_cfg.env}); clients "
                              "cannot send masks yet: serve an env without action masks")
        if not isinstance(spec.observation_space, gym.spaces.Box):
            raise ConfigError(f"marl serve: policy '{pid}' observes a {type(spec.observation_space).__name__} space; "
                              "clients send flat lists of numbers, so served envs need Box observations")
        if sb.STATE in config.runner_columns(pid):
            raise ConfigError(f"marl serve: {config.algo_name} reads the env's global state at every step (centralised "
                              f"critic of policy '{pid}'), which clients do not send; serve PPO instead")


class RequestError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class RequestChecks:
    """The observation and step checks of `ExperienceServer` (mixed in; reads its agents, policies and spaces)."""

    def _obs(self, body, key: str = "obs") -> dict[str, np.ndarray]:
        if not isinstance(body, dict) or not isinstance(body.get(key), dict) or not body[key]:
            raise RequestError(400, f"body must be a JSON object with '{key}': {{agent id: [float, ...]}}")
        out = {}
        unknown = [a for a in body[key] if a not in self.agent_index]
        if unknown:
            raise RequestError(400, f"unknown agent id(s) {unknown}; this env's agents: {self.possible_agents}")
        for agent, value in body[key].items():
            pid = self.policy_of[agent]
            try:  # float64 first: a value beyond float32 would silently become inf
                wide = np.asarray(value, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError, OverflowError):
                raise RequestError(400, f"observation of '{agent}' is not a list of numbers") from None
            if wide.size != self.obs_dim[pid]:
                raise RequestError(400, f"observation of '{agent}' must be {self.obs_dim[pid]} finite numbers, got {wide.size}")
            bad = np.flatnonzero(~np.isfinite(wide))
            if bad.size:
                raise RequestError(400, f"observation of '{agent}' has a non-finite value ({wide[bad[0]]}) at index "
                                        f"{bad[0]}: observations must be finite numbers")
            big = np.flatnonzero(np.abs(wide) > FLOAT32_MAX)
            if big.size:
                raise RequestError(400, f"observation of '{agent}' has {wide[big[0]]:g} at index {big[0]}, beyond float32 "
                                        f"(|x| <= {FLOAT32_MAX:.4g}), which observations are kept in")
            out[agent] = wide.astype(np.float32)
        return out

    def _checked_step(self, i: int, step) -> tuple[dict, dict, dict]:
        where = f"steps[{i}]"
        if not isinstance(step, dict):
            raise RequestError(400, f"{where} must be an object with obs, actions, logp, vf, rewards")
        try:
            obs = self._obs(step)
        except RequestError as err:
            raise RequestError(400, f"{where}: {err.message}") from None
        acted = {}
        for agent in obs:
            pid = self.policy_of[agent]
            action = (step.get("actions") or {}).get(agent)
            logp = (step.get("logp") or {}).get(agent)
            vf = (step.get("vf") or {}).get(agent, 0.0 if not self.values[pid] else None)
            space = self.action_spaces[pid]
            try:
                if self.discrete[pid] and (isinstance(action, bool) or not isinstance(action, int)):
                    raise TypeError
                act = np.asarray(action, dtype=space.dtype if self.discrete[pid] else np.float32)
                ok = act.shape == space.shape and (not self.discrete[pid] or space.contains(act)) and bool(np.all(np.isfinite(act)))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise RequestError(400, f"{where}: action of '{agent}' must be an element of {space}, got {action!r}")
            for name, value in (("logp", logp), ("vf", vf)):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise RequestError(400, f"{where}: '{name}' of '{agent}' must be a finite number, got {value!r}"
                                            + (" (this algorithm records value estimates)" if name == "vf" else ""))
            acted[agent] = (act, float(logp), float(vf))
        rewards = step.get("rewards") or {}
        if not isinstance(rewards, dict):
            raise RequestError(400, f"{where}: 'rewards' must be {{agent id: float}}")
        for agent, r in rewards.items():
            if agent not in acted:
                raise RequestError(400, f"{where}: reward for '{agent}', which did not act in this step")
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r):
                raise RequestError(400, f"{where}: reward of '{agent}' must be a finite number, got {r!r}")
        return obs, acted, {a: float(r) for a, r in rewards.items()}
