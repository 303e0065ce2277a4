"""VMAS scenarios (`vmas.<scenario>`): one VMAS env object simulates a batch of worlds in torch.

`environment.env: vmas.balance` names any scenario `vmas.make_env` accepts: VMAS's own, its MPE ports
(`vmas.simple_spread`, `vmas.simple_tag`, ...) and its debug scenarios. `environment.env_config` holds
the scenario's kwargs (`n_agents`, ...) plus VMAS's options `max_steps` (default 100: most VMAS
scenarios never end an episode by themselves, so without it an episode would never finish; an
explicit `max_steps: null` keeps VMAS's infinite horizon), `continuous_actions` (default true; false
gives each agent a Discrete space), `device` (default: `env_runners.device`, else cpu) and
`clamp_actions`.

Two ways in:

- `VmasEnv`, the batched adapter (`marl.envs.batched`): tensors [worlds, ...] per agent, worlds that
  ended reset inside `step` (all at once when all ended: one reset call, not one per world).
  `BatchedEnvRunner` drives it (the default for `vmas.*`).
- `BatchViews(VmasEnv(...), seeded=False)` (`marl.envs.batched_view`): each world as a `MultiAgentEnv` for the
  dict-API runner (`VectorEnvRunner`, used where the batched runner does not support a policy, e.g. recurrent modules).

Randomness: VMAS keeps its own generator (`Environment.vmas_random_state`), seeded once per env from
`debugging.seed` and the runner; per-world reset seeds are not used and a world's state cannot be
saved, so a restored run starts fresh episodes.
"""

from __future__ import annotations

import difflib
import importlib.util
import logging
import warnings
from typing import Any

import gymnasium
import torch

from marl.envs.base import EnvError
from marl.envs.batched import BatchedEnv, BatchedStep, per_world
from marl.envs.batched_view import WorldView, single_world

PREFIX = "vmas."
DEFAULT_MAX_STEPS = 100
_VMAS_OPTIONS = ("max_steps", "continuous_actions", "device", "clamp_actions")
log = logging.getLogger(__name__)


def is_vmas(name: str | None) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def _import_vmas():
    if importlib.util.find_spec("vmas") is None:
        raise EnvError("VMAS scenarios need the vmas package: pip install 'marl[vmas]'")
    import vmas

    return vmas


def known_scenarios(vmas) -> list[str]:
    """Every scenario name `vmas.make_env` loads: VMAS's own, its MPE ports and its debug scenarios."""
    names = set()
    for attr in ("scenarios", "mpe_scenarios", "debug_scenarios"):
        names.update(getattr(vmas, attr, None) or [])
    return sorted(names)


def to_gymnasium(space) -> gymnasium.Space:
    """VMAS builds its spaces with the old `gym` package; marl's modules and connectors read Gymnasium's."""
    kind = type(space).__name__
    if kind == "Box":
        return gymnasium.spaces.Box(space.low, space.high, space.shape, space.dtype)
    if kind == "Discrete":
        return gymnasium.spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return gymnasium.spaces.MultiDiscrete(space.nvec)
    raise EnvError(f"VMAS space {space} ({kind}) has no Gymnasium equivalent marl knows")


def _make(name: str, env_config: dict[str, Any], num_envs: int, seed: int | None, device=None):
    """(the VMAS env, continuous actions?) for `vmas.<scenario>` and its env_config, checked."""
    vmas = _import_vmas()
    scenario = name[len(PREFIX):]
    known = known_scenarios(vmas)
    if known and scenario not in known:
        near = difflib.get_close_matches(scenario, known, n=2)
        hint = f" (did you mean {' or '.join(PREFIX + n for n in near)}?)" if near else ""
        raise EnvError(f"unknown VMAS scenario {name!r}{hint}; VMAS has: {', '.join(known)}")
    config = dict(env_config)
    options = {k: config.pop(k) for k in _VMAS_OPTIONS if k in config}
    if "max_steps" not in options:
        log.info("%s: env_config sets no max_steps; episodes end after %d steps "
                 "(environment.env_config.max_steps; null: VMAS's infinite horizon)", name, DEFAULT_MAX_STEPS)
    max_steps = options.get("max_steps", DEFAULT_MAX_STEPS)
    if max_steps is not None and (not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1):
        raise EnvError(f"env {name!r}: environment.env_config.max_steps must be a positive integer or null, got {max_steps!r}")
    continuous = bool(options.get("continuous_actions", True))
    device = options.get("device", device or "cpu")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = vmas.make_env(
                scenario, num_envs=num_envs, device=device, continuous_actions=continuous, max_steps=max_steps,
                seed=seed, clamp_actions=bool(options.get("clamp_actions", True)), terminated_truncated=True, **config,
            )
    except TypeError as err:
        raise EnvError(f"env {name!r} rejected its env_config: {err}") from err
    for w in caught:
        if "passed but not used by the scenario" in str(w.message):  # VMAS only warns: a typo would go unseen
            raise EnvError(
                f"env {name!r}: env_config has keys the scenario does not use ({str(w.message).split(' passed')[0]}); "
                f"env_config takes the scenario's kwargs and VMAS's {list(_VMAS_OPTIONS)}"
            )
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return env, continuous


class VmasEnv(BatchedEnv):
    """A VMAS env of `num_worlds` worlds as a `BatchedEnv` (tensors per agent, auto-reset)."""

    def __init__(self, name: str, env_config: dict[str, Any], num_worlds: int, seed: int | None = None, device=None):
        self.env, self.continuous = _make(name, env_config, num_worlds, seed, device)
        self.name = name
        self.num_worlds = num_worlds
        self.device = torch.device(self.env.device)
        self.agents = [a.name for a in self.env.agents]
        super().__init__(
            {a: to_gymnasium(s) for a, s in zip(self.agents, self.env.observation_space.spaces)},
            {a: to_gymnasium(s) for a, s in zip(self.agents, self.env.action_space.spaces)},
        )
        self._action_dtype = torch.float32 if self.continuous else torch.int64

    def _obs_dict(self, obs: list) -> dict[str, torch.Tensor]:
        return dict(zip(self.agents, obs))

    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        self._last_obs = self._obs_dict(self.env.reset(seed=seed))
        return self._last_obs

    def reset_worlds(self, worlds: torch.Tensor) -> dict[str, torch.Tensor]:
        """Resets the worlds in `worlds` (int indices) mid-episode; returns every world's observations (the state()
        of the others stays that of the observations last handed out)."""
        fresh = self._reset_worlds(worlds)
        reset = torch.zeros(self.num_worlds, dtype=torch.bool, device=self.device)
        reset[worlds] = True
        self._last_obs = {a: torch.where(reset.view(-1, *([1] * (o.dim() - 1))), fresh[a], o)
                          for a, o in self._last_obs.items()}
        return fresh

    def _reset_worlds(self, worlds: torch.Tensor) -> dict[str, torch.Tensor]:
        """Resets the worlds in `worlds`; returns every world's observations, one pass for all."""
        if len(worlds) == self.num_worlds:  # all ended together (a shared max_steps): one reset, not W
            self.env.reset(return_observations=False)
        else:
            for k in worlds.tolist():
                self.env.reset_at(k, return_observations=False)
        (obs,) = self.env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)
        return self._obs_dict(obs)

    def step(self, actions: dict[str, torch.Tensor]) -> BatchedStep:
        joint = [actions[a].to(self._action_dtype) for a in self.agents]
        obs, rewards, terminated, truncated, _ = self.env.step(joint)
        obs = self._obs_dict(obs)
        terminated, truncated = terminated.bool(), truncated.bool() & ~terminated.bool()
        done = terminated | truncated
        final_obs = final_state = None
        if bool(done.any()):
            final_obs, final_state = obs, self.state(obs)
            fresh = self._reset_worlds(done.nonzero().flatten())
            ended = done.view(-1, *([1] * (next(iter(obs.values())).dim() - 1)))
            # Worlds still running keep the observation of their step (VMAS observations may carry noise).
            obs = {a: torch.where(ended, fresh[a], o) for a, o in obs.items()}
        self._last_obs = obs
        rewards = {a: per_world(r, self.name, f"the reward of {a}") for a, r in zip(self.agents, rewards)}
        return BatchedStep(obs, rewards, terminated, truncated, final_obs, final_state)


def make_vmas_env(name: str, env_config: dict[str, Any], seed: int | None = 0) -> WorldView:
    """A single-world VMAS env (num_envs=1): for probing spaces, tests and the plain runner."""
    return single_world(VmasEnv(name, env_config, 1, seed), seeded=False)
