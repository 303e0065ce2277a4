"""`BatchViews`: the K worlds of a `BatchedEnv` presented world by world through the dict API (`MultiAgentEnv`).

`views[k]` is world k. What `make_env("jaxmarl.X")`, `make_env("vmas.X")` and a `register_batched_env` name return
(one world: `BatchViews(env).views[0]`, which steps itself), and what `VectorEnvRunner` gives its per-copy bookkeeping
(K worlds: `BatchViews.step` steps every world together, then each view's `step()` returns its row; stepping a
world of several on its own is one EnvError).

- Observations are NumPy dicts. A step that ends a world's episode returns the observation it reached (the batched
  env already auto-reset it); the world's next `reset()` hands out the auto-reset first observation instead of
  resetting again. `seeded` views (one world) reset for real when given a seed; unseeded ones (VMAS: its own
  generator) ignore it. A world that did not end resets on its own through the env's `reset_worlds(indices)`
  where it has one (else the whole env resets: one world).
- Action masks (`BatchedEnv.action_masks()`) follow the PettingZoo convention marl's dict path
  reads: each agent's observation space is `Dict(observation=..., action_mask=Box(0, 1, (n,), int8))`
  and each observation `{"observation": ..., "action_mask": ...}`. In the step that ends an episode
  the mask beside the final observation is the next episode's first (nothing acts on it).
- `state()`: the batched env's global state of the world (after a step that ended it: the state reached, until the
  world is reset), read once per step for all worlds and only when asked.
- Actions a world's dict lacks (its agents parked or retired) are no-ops: zeros.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch

from marl.envs.base import ALL, AgentID, EnvError, InfoDict, MultiAgentEnv, ObsDict, StepResult
from marl.envs.batched import BatchedEnv


def dict_observation_space(env: BatchedEnv, agent: AgentID, masked: bool) -> gymnasium.Space:
    """One agent's observation space as the dict API presents it: where the env gives action masks, PettingZoo's
    `Dict(observation=..., action_mask=Box(0, 1, (n,), int8))`."""
    space = env.observation_space(agent)
    if not masked:
        return space
    n = int(env.action_space(agent).n)
    return gymnasium.spaces.Dict({"observation": space, "action_mask": gymnasium.spaces.Box(0, 1, (n,), np.int8)})


def _numpy(t) -> np.ndarray:
    return t.detach().cpu().numpy()


class BatchViews:
    """The worlds of `batched` as `views` (see the module docstring)."""

    def __init__(self, batched: BatchedEnv, seeded: bool = True) -> None:
        if seeded and batched.num_worlds != 1:
            raise ValueError(f"{batched.name!r}: seeded views reset every world at a seed; it has {batched.num_worlds}")
        self.batched, self.seeded = batched, seeded
        self.name, self.num_envs, self.agents = batched.name, batched.num_worlds, list(batched.agents)
        self.masked = batched.action_masks() is not None
        self._noop = {a: np.zeros(s.shape, s.dtype) if isinstance(s, gymnasium.spaces.Box) else 0
                      for a, s in ((a, batched.action_space(a)) for a in self.agents)}
        self.views = [WorldView(self, k) for k in range(self.num_envs)]
        self._started = False
        self._obs = self._masks = None  # every world's latest observations (auto-reset ones where it ended), masks
        self._ready: set[int] = set()  # worlds reset (at the start, or auto-reset by a step) not handed out yet
        self._result = None  # the last step's (obs reached, rewards, terminated, truncated) per agent, NumPy
        self._fresh = [False] * self.num_envs  # world k's row of `_result` not handed out yet
        self._final_state = self._states = None  # the states reached by worlds that ended; every world's now (cached)
        if not seeded:  # every world starts now (one reset of all, as the batched path starts: not one per world)
            self._reset_all(None)

    def _reset_all(self, seed: int | None) -> None:
        self._take(self.batched.reset(seed=seed))
        self._started, self._ready, self._final_state = True, set(range(self.num_envs)), None

    def _take(self, obs: dict) -> None:
        self._obs = [_numpy(obs[a]) for a in self.agents]
        self._read_masks()

    def _read_masks(self) -> None:
        masks = self.batched.action_masks() if self.masked else None
        self._masks = None if masks is None else [_numpy(masks[a]).astype(np.int8) for a in self.agents]
        self._states = None

    def _row(self, obs: list, k: int) -> ObsDict:
        if self._masks is None:
            return {a: o[k] for a, o in zip(self.agents, obs)}
        return {a: {"observation": o[k], "action_mask": m[k]} for a, o, m in zip(self.agents, obs, self._masks)}

    def step(self, actions: list[dict]) -> None:
        """Steps every world; `actions[k]` is world k's {agent: action} (a missing one: a no-op)."""
        noop, device = self._noop, self.batched.device
        joint = {a: torch.as_tensor(np.stack([acts.get(a, noop[a]) for acts in actions]), device=device)
                 for a in self.agents}
        out = self.batched.step(joint)
        reached = out.obs if out.final_obs is None else {
            a: torch.where(out.done.view(-1, *([1] * (o.dim() - 1))), out.final_obs[a], o) for a, o in out.obs.items()}
        self._take(out.obs)
        self._result = ([_numpy(reached[a]) for a in self.agents], [_numpy(out.rewards[a]) for a in self.agents],
                        _numpy(out.terminated), _numpy(out.truncated))
        self._fresh = [True] * self.num_envs
        self._ready = set() if out.final_obs is None else {int(k) for k in np.flatnonzero(_numpy(out.done))}
        self._final_state = out.final_state if self._ready else None

    def reset_world(self, k: int, seed: int | None) -> ObsDict:
        reset_worlds = getattr(self.batched, "reset_worlds", None)
        if (self.seeded and seed is not None) or not self._started or (k not in self._ready and reset_worlds is None):
            if self._started and self.num_envs > 1 and k not in self._ready:
                raise EnvError(f"{self.name}: world {k} of {self.num_envs} cannot reset on its own "
                               f"({type(self.batched).__name__} has no reset_worlds)")
            self._reset_all(seed if self.seeded else None)
        elif k not in self._ready:  # mid-episode: this world alone
            fresh = self.batched.reset_worlds(torch.tensor([k]))
            self._read_masks()
            return self._row([_numpy(fresh[a]) for a in self.agents], k)
        if self._final_state is not None and k in self._ready:
            self._states = None  # its row: the state now, no longer the one reached
        self._ready.discard(k)
        return self._row(self._obs, k)

    def world_result(self, k: int) -> StepResult:
        if not self._fresh[k]:
            raise EnvError(
                f"{self.name}: world {k} of a batch of {self.num_envs} was stepped on its own; the worlds of a batched "
                "env are stepped together (BatchViews.step), then each world's step() returns its row"
            )
        self._fresh[k] = False
        obs, rewards, terminated, truncated = self._result
        term, trunc = bool(terminated[k]), bool(truncated[k])
        done = term or trunc
        agents = self.agents
        row = {a: o[k] for a, o in zip(agents, obs)} if self._masks is None else self._row(obs, k)
        return (row, {a: float(r[k]) for a, r in zip(agents, rewards)},
                {**dict.fromkeys(agents, term), ALL: done}, {**dict.fromkeys(agents, trunc), ALL: done}, {})

    def state_rows(self) -> np.ndarray:
        """[W, S]: each world's global state; the state reached where a world ended and was not reset yet."""
        rows = _numpy(self.batched.state())
        if self._final_state is not None and self._ready:
            ended = sorted(self._ready)
            rows = rows.copy()
            rows[ended] = _numpy(self._final_state[ended])
        self._states = rows
        return rows


class WorldView(MultiAgentEnv):
    """World `index` of a `BatchViews`, as a `MultiAgentEnv` (all agents act at every step)."""

    def __init__(self, batch: BatchViews, index: int) -> None:
        self.batch, self.index = batch, index
        self.possible_agents = list(batch.agents)
        self.metadata = {"name": batch.name, "turn_based": False, "num_worlds": batch.num_envs}

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        return dict_observation_space(self.batch.batched, agent, self.batch.masked)

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        return self.batch.batched.action_space(agent)

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        return self.batch.reset_world(self.index, seed), {}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        if self.batch.num_envs == 1 and not self.batch._fresh[0]:  # a lone world steps itself, unless a
            self.batch.step([actions])  # VectorEnvRunner just stepped the batch
        return self.batch.world_result(self.index)

    def state(self) -> np.ndarray:
        """A copy: the runner keeps the state reached at a truncation until after the world is reset (a view of the
        shared row made MAPPO bootstrap truncated pieces from the next episode's start)."""
        rows = self.batch._states
        return (self.batch.state_rows() if rows is None else rows)[self.index].copy()

    def np_random_source(self):
        return None  # the batched env keeps its own generator (saved by its get_state)

    def close(self) -> None:
        if self.index == 0:
            self.batch.batched.close()


def single_world(batched: BatchedEnv, seeded: bool = True) -> WorldView:
    """World 0 of `batched` (one world) as a `MultiAgentEnv`: what `make_env` returns for a batched family."""
    return BatchViews(batched, seeded).views[0]
