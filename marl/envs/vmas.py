"""VMAS scenarios (`vmas.<scenario>`): one VMAS env object simulates a batch of worlds in torch.

`environment.env: vmas.balance` names VMAS's `balance` scenario; `environment.env_config`
holds the scenario's kwargs (`n_agents`, ...) plus VMAS's own options `max_steps`
(default 100: VMAS scenarios run forever otherwise), `continuous_actions` (default true;
false gives each agent a Discrete space), `device` (default cpu) and `clamp_actions`.

A runner does not make K Python copies of the env: `VmasBatch` makes ONE VMAS env with
`num_envs = num_envs_per_env_runner` worlds, and K `VmasWorld` views, one per world, present
each world through the `MultiAgentEnv` protocol to the runner's per-copy bookkeeping.
`VmasBatch.step(actions)` stacks the K worlds' actions into one tensor per agent and steps
every world in one call; each view then hands out its row of the results (NumPy views
of the result tensors: no copy on CPU; the runner's batches are NumPy). The worlds whose
episode ended are reset right after the step (`reset_at` each, one observation pass for all).
`state()` (MAPPO's global state) is every agent's observation joined, built for all worlds at once. `marl.runners.vector_env_runner.VectorEnvRunner` drives this.

Randomness: VMAS keeps its own generator, seeded once per batch (from `debugging.seed`
and the runner), so per-world reset seeds are not used and an episode cannot be replayed
from a checkpoint: a restored run starts fresh episodes.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import gymnasium
import numpy as np

from marl.envs.base import ALL, AgentID, EnvError, InfoDict, MultiAgentEnv, ObsDict, StepResult

PREFIX = "vmas."
DEFAULT_MAX_STEPS = 100
_VMAS_OPTIONS = ("max_steps", "continuous_actions", "device", "clamp_actions")


def is_vmas(name: str | None) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def _import_vmas():
    if importlib.util.find_spec("vmas") is None:
        raise EnvError("VMAS scenarios need the vmas package: pip install 'marl[vmas]'")
    import vmas

    return vmas


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


class VmasBatch:
    """One VMAS env of `num_envs` worlds, stepped all at once; `views[k]` is world k."""

    def __init__(self, name: str, env_config: dict[str, Any], num_envs: int, seed: int | None = None) -> None:
        vmas = _import_vmas()
        scenario = name[len(PREFIX):]
        known = getattr(vmas, "scenarios", None) or []
        if known and scenario not in known:
            import difflib

            near = difflib.get_close_matches(scenario, known, n=2)
            hint = f" (did you mean {' or '.join(PREFIX + n for n in near)}?)" if near else ""
            raise EnvError(f"unknown VMAS scenario {name!r}{hint}; VMAS has: {', '.join(sorted(known))}")
        config = dict(env_config)
        options = {k: config.pop(k) for k in _VMAS_OPTIONS if k in config}
        self.continuous = bool(options.get("continuous_actions", True))
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.env = vmas.make_env(
                    scenario, num_envs=num_envs, device=options.get("device", "cpu"),
                    continuous_actions=self.continuous, max_steps=options.get("max_steps", DEFAULT_MAX_STEPS),
                    seed=seed, clamp_actions=bool(options.get("clamp_actions", True)), terminated_truncated=True,
                    **config,
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
        self.name = name
        self.num_envs = num_envs
        self.agents = [a.name for a in self.env.agents]
        self.obs_spaces = {a: to_gymnasium(s) for a, s in zip(self.agents, self.env.observation_space.spaces)}
        self.act_spaces = {a: to_gymnasium(s) for a, s in zip(self.agents, self.env.action_space.spaces)}
        self._noop = {a: np.zeros(s.shape, s.dtype) if isinstance(s, gymnasium.spaces.Box) else 0
                      for a, s in self.act_spaces.items()}
        self.device = self.env.device
        self.views = [VmasWorld(self, k) for k in range(num_envs)]
        self.result = None  # the last step's (obs, rewards, terminated, truncated) as NumPy, per agent
        self._fresh = [False] * num_envs  # world k's row of `result` not handed out yet
        self._reset_obs, self._reset_ready = None, set()  # worlds reset right after the last step (_reset_early)
        # Global state of every world (centralised critics): the agents' observations joined, one row per world,
        # built with one concatenate per step instead of one per world; a world's row is replaced when it resets.
        self._state_dim = sum(int(np.prod(self.obs_spaces[a].shape)) for a in self.agents)
        self.states = np.zeros((num_envs, self._state_dim), np.float32)

    def step(self, actions: list[dict]) -> None:
        """Steps every world; `actions[k]` is world k's {agent: action} (a missing one: a no-op)."""
        import torch

        noop = self._noop
        joint = []
        for a in self.agents:
            stacked = np.stack([acts.get(a, noop[a]) for acts in actions])
            tensor = torch.as_tensor(stacked, device=self.device)
            joint.append(tensor.float() if self.continuous else tensor.long())
        obs, rewards, terminated, truncated, _ = self.env.step(joint)
        self.result = (
            [_to_numpy(o) for o in obs], [_to_numpy(r) for r in rewards], _to_numpy(terminated), _to_numpy(truncated)
        )
        self._fresh = [True] * self.num_envs
        self.states = np.concatenate([o.reshape(self.num_envs, -1) for o in self.result[0]], axis=1, dtype=np.float32)
        self._reset_early(np.flatnonzero(self.result[2] | self.result[3]))

    def _reset_early(self, ended) -> None:
        """Resets the worlds that just ended, with ONE observation pass for all of them.

        `reset_at(k)` alone recomputes every world's observations; at hundreds of worlds
        that per-world pass cost more than the step itself. The runner's `reset()` of such
        a world then hands out the observation computed here (until the next batch step).
        """
        self._reset_obs, self._reset_ready = None, set()
        if len(ended) == 0:
            return
        for k in ended:
            self.env.reset_at(int(k), return_observations=False)
        (obs,) = self.env.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)
        self._reset_obs = [_to_numpy(o) for o in obs]
        self._reset_ready = {int(k) for k in ended}

    def reset_world(self, k: int) -> ObsDict:
        if k in self._reset_ready:  # reset right after the step that ended it
            self._reset_ready.discard(k)
            obs = {a: o[k] for a, o in zip(self.agents, self._reset_obs)}
        else:
            obs = {a: _to_numpy(o[k]) for a, o in zip(self.agents, self.env.reset_at(k))}
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
            {**dict.fromkeys(agents, trunc and not term), ALL: done},
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
        return self._space(self.batch.obs_spaces, agent)

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        return self._space(self.batch.act_spaces, agent)

    def _space(self, spaces: dict, agent: AgentID) -> gymnasium.Space:
        try:
            return spaces[agent]
        except KeyError:
            raise EnvError(f"env {self.batch.name!r} has no agent {agent!r}; possible agents: {self.possible_agents}") from None

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        # VMAS draws world resets from its own generator (seeded per batch); `seed` is not used.
        return self.batch.reset_world(self.index), {}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        if self.batch.num_envs == 1:  # a lone world (e.g. `make_env("vmas.balance")`) steps itself
            self.batch.step([actions])
        return self.batch.world_result(self.index)

    def state(self) -> np.ndarray:
        """Every agent's observation of this world, joined in agent order (computed batched by VmasBatch)."""
        return self.batch.states[self.index]

    def np_random_source(self):
        return None

    def close(self) -> None:
        if self.index == 0:
            self.batch.close()


def make_vmas_env(name: str, env_config: dict[str, Any], seed: int | None = 0) -> VmasWorld:
    """A single-world VMAS env (num_envs=1): for probing spaces, tests and the plain runner."""
    return VmasBatch(name, env_config, num_envs=1, seed=seed).views[0]
