"""JaxMARL envs (`jaxmarl.<env id>`) as a `BatchedEnv`: `num_worlds` worlds stepped by one jitted, vmapped call.

`environment.env: jaxmarl.MPE_simple_spread_v3` names any id in `jaxmarl.registered_envs`
(`jaxmarl.SMAX`, `jaxmarl.HeuristicEnemySMAX`, ...); `environment.env_config` is passed to
`jaxmarl.make` as the env's kwargs (SMAX's `scenario` may be a map name: `{scenario: 3m}`).

Each step is ONE call of a jitted function over flat arrays (actions [W, N] in; one packed float32
array out): it splits the PRNG key, calls the env's `step_env` (not `step`, whose auto-reset drops
the observation reached), resets the worlds that ended and packs next observations, the observations
reached, rewards, flags, action masks and global states into one [W, K] array that torch reads
without a copy (on the CPU as a NumPy view, DLPack on an accelerator); the per-agent tensors handed out
are views of it. Actions go in the same way (a fresh int32/float32 array each step: feeding one reused
buffer measured 4x slower).

World-level done is the env's `__all__`; a world that ended at the env's `max_steps` is truncated
(it bootstraps), any other end is terminated. Masks: `get_avail_actions` where the env defines it
(SMAX; Hanabi's `get_legal_moves`); the global state: `get_world_state` where the env has it (SMAX), else the observations joined.
`stack=True` (what the batched runner asks for) hands out the stacked form where the agents are alike
in spaces: observations [W, N, ...], rewards [W, N], masks [W, N, n] as single views of the packed
array (each agent's columns sit side by side), actions [W, N] in: no Python object per agent per step.
`get_state()` saves the env state pytree, the PRNG key and the last packed output as NumPy: a
restored env continues exactly. Device: the JAX device matching `env_runners.device` (cpu: JAX's CPU
backend, also on a machine whose JAX has a GPU; cuda:i: JAX's i-th GPU), chosen by committing the PRNG key
and state there; the torch tensors handed out live on the same device, shared through DLPack.

The packed layout and the jitted reset/step: `marl.envs.jaxmarl_packed`; making the env by name: `marl.envs.jaxmarl_make`.
A compiled caller (`marl.runners.jax_rollout`) scans `step_body` itself from `step_state` and hands the worlds back
with `adopt`.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import gymnasium
import numpy as np
import torch

from marl.envs.batched import BatchedEnv, BatchedStep
from marl.envs.jaxmarl_make import PREFIX, import_jaxmarl, jax_device, make_jaxmarl, to_gymnasium
from marl.envs.jaxmarl_packed import compile_steps, packed_layout

__all__ = ["PREFIX", "JaxMarlEnv", "StepState"]  # (PREFIX: where the env families look for it)

_COMPILED: dict[tuple, tuple] = {}  # (name, env_config, num_worlds) -> jitted reset, jitted step, the step's body
_READ_ONLY_WARNED = False


def _from_read_only(array: np.ndarray) -> None:
    """The first read-only NumPy view handed to torch, its once-per-process warning held back (the views are read-only
    on purpose: they are JAX's buffers)."""
    global _READ_ONLY_WARNED
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        torch.from_numpy(array)
    _READ_ONLY_WARNED = True


class StepState(NamedTuple):
    """Where a `JaxMarlEnv`'s worlds stand, as its `step_body` takes them (`JaxMarlEnv.step_state`)."""

    key: Any  # the PRNG key (JAX)
    state: Any  # the env state pytree, vmapped over the worlds (JAX)
    packed: np.ndarray | None  # the last packed output [W, K]


class JaxMarlEnv(BatchedEnv):
    """A JaxMARL env over `num_worlds` worlds as a `BatchedEnv` (see the module docstring)."""

    def __init__(self, name: str, env_config: dict[str, Any], num_worlds: int, seed: int | None = None, device=None,
                 stack: bool = False):
        jax, _ = import_jaxmarl()
        self._jax_device = jax_device(jax, name, device)
        self.env = env = make_jaxmarl(name, env_config)
        self.name, self.num_worlds = name, num_worlds
        self.device = torch.device("cpu" if device is None else device)
        self.agents = list(env.agents)
        super().__init__({a: to_gymnasium(env.observation_space(a)) for a in self.agents},
                         {a: to_gymnasium(env.action_space(a)) for a in self.agents})
        self._jax = jax
        self._discrete = {a: isinstance(self._act_spaces[a], gymnasium.spaces.Discrete) for a in self.agents}
        self._all_discrete = all(self._discrete.values())
        first = self.agents[0]
        self.stacked = stack and all(self._obs_spaces[a] == self._obs_spaces[first]
                                     and self._act_spaces[a] == self._act_spaces[first] for a in self.agents)
        from jaxmarl.environments.multi_agent_env import MultiAgentEnv  # its get_avail_actions only raises

        # Legal actions: `get_avail_actions` where the env overrides it, Hanabi's `get_legal_moves` (the player not on
        # turn may only pass), none otherwise.
        own = type(env).get_avail_actions is not MultiAgentEnv.get_avail_actions
        self._mask_fn = env.get_avail_actions if own else getattr(env, "get_legal_moves", None)
        self._masked = self._mask_fn is not None and all(self._discrete.values())
        self._world_state = callable(getattr(env, "get_world_state", None))
        self._key = self._put(jax.random.PRNGKey(0 if seed is None else int(seed)))
        self.packed_columns, self._width = packed_layout(jax, env, self.agents, self._obs_spaces, self._act_spaces,
                                                         self._masked, self._world_state)
        # One compilation per (env, kwargs, worlds) in a process: probes, evaluation and restored runners reuse it.
        cache_key = (name, repr(sorted(env_config.items())), num_worlds)
        if cache_key not in _COMPILED:
            _COMPILED[cache_key] = compile_steps(jax, env, self.agents, num_worlds, self._act_spaces, self._discrete,
                                                 self._mask_fn if self._masked else None, self._world_state)
        # `step_body` (key, state, actions [W, D]) -> (key, state, packed) un-jitted: `marl.runners.jax_rollout` scans it
        self._reset_fn, self._step_fn, self.step_body = _COMPILED[cache_key]
        self._state = self._packed = self._packed_np = None

    # -- the packed output: one float32 row per world, sliced into per-agent views --------------
    def _put(self, x):
        """`x` committed to this env's JAX device: the jitted calls taking it run there."""
        return self._jax.device_put(x, self._jax_device)

    def _view(self, key: str) -> torch.Tensor:
        return self._packed[:, self.packed_columns[key]]

    def _stacked_view(self, part: str, *shape) -> torch.Tensor:
        """[W, N, *shape]: every agent's `part` columns at once (the agents' blocks are adjacent in the packed array)."""
        return self._packed[:, self.packed_columns[part]].view(self.num_worlds, len(self.agents), *shape)

    def _agent_views(self, part: str) -> dict[str, torch.Tensor] | torch.Tensor:
        if self.stacked:
            return self._stacked_view(part, *self._obs_spaces[self.agents[0]].shape)
        return {a: self._view(f"{part}/{a}").view(self.num_worlds, *self._obs_spaces[a].shape) for a in self.agents}

    def _receive(self, packed) -> None:
        """Takes the packed output: as a NumPy view of JAX's buffer on the CPU (what the flag checks read: NumPy's
        small ops cost a fraction of torch's; and `np.asarray` costs ~1 us where `torch.from_dlpack`'s Python costs
        ~8-15), through DLPack on an accelerator. Either shares the buffer, which nothing writes into."""
        if self.device.type == "cpu":
            self._packed_np = np.asarray(packed)
            if not _READ_ONLY_WARNED:  # torch warns once per process that the view is read-only: it is meant so
                _from_read_only(self._packed_np)
            self._packed = torch.from_numpy(self._packed_np)
        else:
            self._packed = torch.from_dlpack(packed)
            self._packed_np = None
        self._last_obs = self._agent_views("obs")

    # -- the hand-over to a compiled caller (`marl.runners.jax_rollout` scans `step_body` itself) ----------
    @property
    def has_action_masks(self) -> bool:
        """Whether the packed output holds action masks (its `mask` columns)."""
        return self._masked

    @property
    def all_discrete(self) -> bool:
        """Whether every agent's actions are Discrete: `step_body` takes the actions as int32, else as float32."""
        return self._all_discrete

    @property
    def step_state(self) -> StepState:
        """What `step_body` continues from: key, env state and the last packed output (NumPy, a view of JAX's buffer,
        on the CPU; None on an accelerator, where a compiled caller does not run)."""
        return StepState(self._key, self._state, self._packed_np)

    def adopt(self, key, state, packed) -> dict[str, torch.Tensor] | torch.Tensor:
        """Goes on from where a caller that ran `step_body` itself left the worlds (its key, env state and last packed
        output): the next `step` continues from there and the views handed out read `packed`. Returns the observations
        the agents act on next, as `reset` does."""
        self._key, self._state = key, state
        self._receive(packed)
        return self._last_obs

    # -- the contract ------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        if seed is not None:
            self._key = self._put(self._jax.random.PRNGKey(int(seed)))
        self._key, self._state, packed = self._reset_fn(self._key)
        self._receive(packed)
        return self._last_obs

    def step(self, actions: dict[str, torch.Tensor] | torch.Tensor) -> BatchedStep:
        w = self.num_worlds
        if self.device.type == "cpu":  # a fresh contiguous NumPy [W, D] (jax's from_dlpack costs ~0.4 ms of Python
            # per call, most of a 16-world step; NumPy's cast costs a third of torch's)
            dtype = np.int32 if self._all_discrete else np.float32
            joint = (actions.numpy() if self.stacked else np.concatenate(
                [actions[a].numpy().reshape(w, -1) for a in self.agents], axis=1)).astype(dtype).reshape(w, -1)
        else:  # DLPack keeps the actions on the device: [W, N, ...] as one fresh contiguous [W, D] tensor
            dtype = torch.int32 if self._all_discrete else torch.float32
            joint = self._jax.dlpack.from_dlpack(
                actions.to(dtype, copy=True, memory_format=torch.contiguous_format).view(w, -1) if self.stacked
                else torch.cat([actions[a].to(dtype).reshape(w, -1) for a in self.agents], dim=1))
        self._key, self._state, packed = self._step_fn(self._key, self._state, joint)
        self._receive(packed)
        if self._packed_np is not None:  # the flags read once, in NumPy
            flags = self._packed_np[:, self.packed_columns["flags"]] > 0.5
            terminated, truncated = torch.from_numpy(flags[:, 0]), torch.from_numpy(flags[:, 1])
            ended = bool(flags.any())
        else:
            flags = self._view("flags")
            terminated, truncated = flags[:, 0] > 0.5, flags[:, 1] > 0.5
            ended = bool((terminated | truncated).any())
        rewards = self._view("rewards")
        final_obs = final_state = None
        if ended:
            final_obs = self._agent_views("final")
            final_state = self._view("final_state") if self._world_state else BatchedEnv.state(self, final_obs)
        per_agent = rewards if self.stacked else {a: rewards[:, i] for i, a in enumerate(self.agents)}
        return BatchedStep(self._last_obs, per_agent, terminated, truncated, final_obs, final_state)

    def state(self, obs: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """SMAX: `get_world_state` of the worlds as they are now (the runner passes the current obs); else obs joined."""
        if self._world_state and self._packed is not None:
            return self._view("state")
        if self._world_state:  # before reset (the runner probing the width)
            return torch.zeros((self.num_worlds, self.packed_columns["state"].stop - self.packed_columns["state"].start))
        return super().state(obs)

    def action_masks(self) -> dict[str, torch.Tensor] | torch.Tensor | None:
        if not self._masked:
            return None
        if self._packed is None:  # before the first reset: every action legal
            masks = {a: torch.ones((self.num_worlds, self._act_spaces[a].n)) for a in self.agents}
            return torch.stack(list(masks.values()), dim=1) if self.stacked else masks
        if self.stacked:
            return self._stacked_view("mask", -1)
        return {a: self._view(f"mask/{a}") for a in self.agents}

    def get_state(self) -> dict | None:
        if self._state is None:
            return None
        leaves = self._jax.tree_util.tree_leaves(self._state)
        return {"leaves": [np.asarray(x).copy() for x in leaves], "key": np.asarray(self._key).copy(),
                "packed": self._packed.cpu().numpy().copy()}

    def set_state(self, state: dict) -> None:
        jax = self._jax
        if self._state is None:  # the pytree's structure comes from a reset
            self.reset()
        treedef = jax.tree_util.tree_structure(self._state)
        self._state = jax.tree_util.tree_unflatten(treedef, [self._put(np.asarray(x)) for x in state["leaves"]])
        self._key = self._put(np.asarray(state["key"]))
        self._receive(self._put(np.asarray(state["packed"])))
