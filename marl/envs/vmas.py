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
- `VmasBatch` + K `VmasWorld` views: each world as a `MultiAgentEnv` for the dict-API runner
  (`VectorEnvRunner`, used where the batched runner does not support a policy, e.g. recurrent modules).

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
import numpy as np
import torch

from marl.envs.base import ALL, AgentID, EnvError, InfoDict, MultiAgentEnv, ObsDict, StepResult
from marl.envs.batched import BatchedEnv, BatchedStep, per_world

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


def _to_numpy(t) -> np.ndarray:
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


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
        """Resets the worlds in `worlds` (int indices); returns every world's observations, one pass for all."""
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
            fresh = self.reset_worlds(done.nonzero().flatten())
            ended = done.view(-1, *([1] * (next(iter(obs.values())).dim() - 1)))
            # Worlds still running keep the observation of their step (VMAS observations may carry noise).
            obs = {a: torch.where(ended, fresh[a], o) for a, o in obs.items()}
        self._last_obs = obs
        rewards = {a: per_world(r, self.name, f"the reward of {a}") for a, r in zip(self.agents, rewards)}
        return BatchedStep(obs, rewards, terminated, truncated, final_obs, final_state)


class VmasBatch:
    """A `VmasEnv` presented world by world to the dict-API runner: `views[k]` is world k."""

    def __init__(self, name: str, env_config: dict[str, Any], num_envs: int, seed: int | None = None) -> None:
        self.batched = VmasEnv(name, env_config, num_envs, seed)
        self.env = self.batched.env
        self.name, self.num_envs, self.agents = name, num_envs, list(self.batched.agents)
        self.continuous = self.batched.continuous
        self.obs_spaces = {a: self.batched.observation_space(a) for a in self.agents}
        self.act_spaces = {a: self.batched.action_space(a) for a in self.agents}
        self._noop = {a: np.zeros(s.shape, s.dtype) if isinstance(s, gymnasium.spaces.Box) else 0
                      for a, s in self.act_spaces.items()}
        self.device = self.batched.device
        self.views = [VmasWorld(self, k) for k in range(num_envs)]
        self.result = None  # the last step's (obs reached, rewards, terminated, truncated) as NumPy, per agent
        self._fresh = [False] * num_envs  # world k's row of `result` not handed out yet
        # Worlds reset and not handed out yet, with their observations: all of them at first (one reset of
        # every world, as the batched path starts: not one reset and observation pass per world), then the
        # worlds each step auto-reset.
        first = self.batched.reset()
        self._reset_obs, self._reset_ready = [_to_numpy(first[a]) for a in self.agents], set(range(num_envs))
        # Global state of every world (centralised critics): the agents' observations joined, one row per world;
        # a world's row is replaced when it resets.
        self.states = np.zeros((num_envs, sum(int(np.prod(s.shape)) for s in self.obs_spaces.values())), np.float32)

    def step(self, actions: list[dict]) -> None:
        """Steps every world; `actions[k]` is world k's {agent: action} (a missing one: a no-op)."""
        noop = self._noop
        joint = {a: torch.as_tensor(np.stack([acts.get(a, noop[a]) for acts in actions]), device=self.device)
                 for a in self.agents}
        out = self.batched.step(joint)
        done = _to_numpy(out.done)
        reached = out.obs if out.final_obs is None else {
            a: torch.where(out.done.view(-1, *([1] * (o.dim() - 1))), out.final_obs[a], o) for a, o in out.obs.items()}
        self.result = ([_to_numpy(reached[a]) for a in self.agents], [_to_numpy(out.rewards[a]) for a in self.agents],
                       _to_numpy(out.terminated), _to_numpy(out.truncated))
        self._fresh = [True] * self.num_envs
        self.states = np.concatenate([o.reshape(self.num_envs, -1) for o in self.result[0]], axis=1, dtype=np.float32)
        self._reset_ready = {int(k) for k in np.flatnonzero(done)}
        self._reset_obs = [_to_numpy(out.obs[a]) for a in self.agents] if self._reset_ready else None

    def reset_world(self, k: int) -> ObsDict:
        if k in self._reset_ready:  # auto-reset by the step that ended it
            self._reset_ready.discard(k)
            obs = {a: o[k] for a, o in zip(self.agents, self._reset_obs)}
        else:
            fresh = self.batched.reset_worlds(torch.tensor([k]))
            obs = {a: _to_numpy(fresh[a][k]) for a in self.agents}
        self.states[k] = np.concatenate([o.reshape(-1) for o in obs.values()])
        return obs

    def world_result(self, k: int) -> StepResult:
        if not self._fresh[k]:
            raise EnvError(
                f"{self.name}: world {k} of a batch of {self.num_envs} was stepped on its own; VMAS worlds are "
                "stepped together (VmasBatch.step), then each world's step() returns its row"
            )
        self._fresh[k] = False
        obs, rewards, terminated, truncated = self.result
        term, trunc = bool(terminated[k]), bool(truncated[k])
        done = term or trunc
        agents = self.agents
        return (
            {a: o[k] for a, o in zip(agents, obs)},
            {a: float(r[k]) for a, r in zip(agents, rewards)},
            {**dict.fromkeys(agents, term), ALL: done},
            {**dict.fromkeys(agents, trunc), ALL: done},
            {},
        )

    def close(self) -> None:
        self.result = None


class VmasWorld(MultiAgentEnv):
    """World `index` of a `VmasBatch`, as a `MultiAgentEnv` (all agents act at every step)."""

    def __init__(self, batch: VmasBatch, index: int) -> None:
        self.batch = batch
        self.index = index
        self.possible_agents = list(batch.agents)
        self.metadata = {"name": batch.name, "turn_based": False, "vmas_num_envs": batch.num_envs}

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        return self.batch.batched.observation_space(agent)

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        return self.batch.batched.action_space(agent)

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        # VMAS draws world resets from its own generator (seeded per batch); `seed` is not used.
        return self.batch.reset_world(self.index), {}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        if self.batch.num_envs == 1 and not self.batch._fresh[0]:  # a lone world (`make_env("vmas.balance")`)
            self.batch.step([actions])  # steps itself, unless a VectorEnvRunner just stepped the batch
        return self.batch.world_result(self.index)

    def state(self) -> np.ndarray:
        """Every agent's observation of this world, joined in agent order (computed batched by VmasBatch).

        A copy: the runner keeps the state reached at a truncation until after the world is reset, which
        rewrites the batch's row (a view made MAPPO bootstrap truncated pieces from the next episode's start)."""
        return self.batch.states[self.index].copy()

    def np_random_source(self):
        return None

    def close(self) -> None:
        if self.index == 0:
            self.batch.close()


def make_vmas_env(name: str, env_config: dict[str, Any], seed: int | None = 0) -> VmasWorld:
    """A single-world VMAS env (num_envs=1): for probing spaces, tests and the plain runner."""
    return VmasBatch(name, env_config, num_envs=1, seed=seed).views[0]
