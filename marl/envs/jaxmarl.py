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
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import os
import warnings
from typing import Any

import gymnasium
import numpy as np
import torch

from marl.envs.base import EnvError
from marl.envs.batched import BatchedEnv, BatchedStep

PREFIX = "jaxmarl."
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


def is_jaxmarl(name: str | None) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def _import_jaxmarl():
    if importlib.util.find_spec("jaxmarl") is None:
        raise EnvError("JaxMARL envs need the jaxmarl package: pip install 'marl[jaxmarl]'")
    # On a GPU, JAX would take 75% of its memory at start-up; torch (the policy, the learner) shares the device in
    # this process, so JAX allocates as it goes unless the user set otherwise.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jaxmarl

    return jax, jaxmarl


def jax_device(jax, name: str, device) -> Any:
    """The JAX device matching torch `device` (cpu, cuda, cuda:i), or one EnvError line saying what JAX here has."""
    device = torch.device("cpu" if device is None else device)
    platform = {"cpu": "cpu", "cuda": "gpu"}.get(device.type)
    try:
        devices = jax.devices(platform) if platform else []
    except RuntimeError:
        devices = []
    index = device.index or 0
    if index >= len(devices):
        raise EnvError(f"env {name!r}: env_runners.device {str(device)!r} needs a JAX {platform or device.type} device "
                       f"{index}, but JAX here has {[str(d) for d in jax.devices()]} (for CUDA: pip install 'jax[cuda13]')")
    return devices[index]


def to_gymnasium(space) -> gymnasium.Space:
    """A JaxMARL space (its own Box/Discrete/MultiDiscrete classes) as Gymnasium's."""
    kind = type(space).__name__
    if kind == "Discrete":
        return gymnasium.spaces.Discrete(int(space.n))
    if kind == "MultiDiscrete":
        return gymnasium.spaces.MultiDiscrete(np.asarray(space.num_categories))
    if kind == "Box":
        shape = tuple(int(d) for d in np.atleast_1d(space.shape))  # (Hanabi's Box gives its shape as one int)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return gymnasium.spaces.Box(low, high, shape, np.float32)
    raise EnvError(f"JaxMARL space {space} ({kind}) has no Gymnasium equivalent marl knows")


def make_jaxmarl(name: str, env_config: dict[str, Any]):
    """The JaxMARL env for `jaxmarl.<env id>` and its kwargs; an unknown id or kwarg is one clear line."""
    _, jaxmarl = _import_jaxmarl()
    env_id = name[len(PREFIX):]
    known = list(jaxmarl.registered_envs)
    if env_id not in known:
        near = difflib.get_close_matches(env_id, known, n=2)
        hint = f" (did you mean {' or '.join(PREFIX + n for n in near)}?)" if near else ""
        raise EnvError(f"unknown JaxMARL env {name!r}{hint}; JaxMARL has: {', '.join(known)}")
    config = dict(env_config)
    if isinstance(config.get("scenario"), str):  # SMAX maps by name: {scenario: 3m}
        from jaxmarl.environments.smax import map_name_to_scenario

        try:
            config["scenario"] = map_name_to_scenario(config["scenario"])
        except KeyError:
            raise EnvError(f"env {name!r}: unknown SMAX scenario {config['scenario']!r} (environment.env_config.scenario)") from None
    try:
        env = jaxmarl.make(env_id, **config)
    except TypeError as err:
        bad = [k for k in config if f"'{k}'" in str(err)]
        what = f"env_config key(s) {bad}" if bad else "its env_config"
        raise EnvError(f"env {name!r} rejected {what}: {err}") from None
    except (ImportError, ValueError) as err:  # JaxMARL's own line for a missing optional package (brax, jaxrobotarium)
        raise EnvError(f"env {name!r}: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    known_keys = _constructor_keys(env)
    unknown = [k for k in config if k not in known_keys]
    if unknown:  # JaxMARL constructors take **kwargs and drop what they do not know: a typo would go unseen
        raise EnvError(f"env {name!r}: env_config has keys the env does not take ({', '.join(unknown)}); "
                       f"it takes: {', '.join(sorted(known_keys))}")
    return env


def _constructor_keys(env) -> set[str]:
    """Named parameters of the constructors an env's kwargs reach (its classes', and a wrapped `_env`'s: SMAX's enemies)."""
    keys = set()
    for obj in (env, getattr(env, "_env", None)):
        for cls in type(obj).__mro__ if obj is not None else ():
            if cls is not object and "__init__" in vars(cls):
                keys.update(p.name for p in inspect.signature(cls.__init__).parameters.values()
                            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
    return keys


def _step_count(state):
    """The env state's step counter (SMAX's enemy wrappers keep it one level down), or None."""
    for s in (state, getattr(state, "state", None)):
        if s is not None and hasattr(s, "step"):
            return s.step
    return None


def agent_part(x, i: int, agent):
    """Agent `agent` (the i-th)'s part of a vmapped JaxMARL output: a dict's entry, or column i of an array whose
    second axis is the agents (STORM's storm_np hands out its observations and rewards so)."""
    return x[agent] if isinstance(x, dict) else x[:, i]


def _world_state(env, state):
    """`env.get_world_state(state)` as one flat array: envs that give one entry per agent (the FACMAC MPE tasks) have
    theirs joined in the env's agent order."""
    ws = env.get_world_state(state)
    if isinstance(ws, dict):
        import jax.numpy as jnp

        return jnp.concatenate([ws[a].reshape(-1) for a in env.agents])
    return ws


class JaxMarlEnv(BatchedEnv):
    """A JaxMARL env over `num_worlds` worlds as a `BatchedEnv` (see the module docstring)."""

    def __init__(self, name: str, env_config: dict[str, Any], num_worlds: int, seed: int | None = None, device=None,
                 stack: bool = False):
        jax, _ = _import_jaxmarl()
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
        self._layout()
        # One compilation per (env, kwargs, worlds) in a process: probes, evaluation and restored runners reuse it.
        cache_key = (name, repr(sorted(env_config.items())), num_worlds)
        if cache_key not in _COMPILED:
            _COMPILED[cache_key] = self._compile()
        # `step_body` (key, state, actions [W, D]) -> (key, state, packed) un-jitted: `marl.runners.jax_rollout` scans it
        self._reset_fn, self._step_fn, self.step_body = _COMPILED[cache_key]
        self._state = self._packed = self._packed_np = None

    # -- the packed output: one float32 row per world, sliced into per-agent views --------------
    def _layout(self) -> None:
        """`packed_columns`: next obs, obs reached, masks (per agent, `obs/<a>`; all agents, `obs`), rewards, flags, states."""
        self.packed_columns: dict[str, slice] = {}
        offset = 0

        def take(key: str, width: int) -> None:
            nonlocal offset
            self.packed_columns[key] = slice(offset, offset + width)
            offset += width

        def take_agents(part: str, width) -> None:  # each agent's columns, side by side, then all of them
            start = offset
            for a in self.agents:
                take(f"{part}/{a}", width(a))
            self.packed_columns[part] = slice(start, offset)

        for part in ("obs", "final"):
            take_agents(part, lambda a: int(np.prod(self._obs_spaces[a].shape)))
        take("rewards", len(self.agents))
        take("flags", 2)  # terminated, truncated
        if self._masked:
            take_agents("mask", lambda a: int(self._act_spaces[a].n))
        if self._world_state:
            jax, env = self._jax, self.env
            shape = jax.eval_shape(lambda k: _world_state(env, env.reset(k)[1]), jax.random.PRNGKey(0)).shape
            take("state", int(np.prod(shape)))
            take("final_state", int(np.prod(shape)))
        self._width = offset

    def _compile(self):
        jax, env, agents = self._jax, self.env, self.agents
        import jax.numpy as jnp

        w = self.num_worlds
        max_steps = getattr(env, "max_steps", None)
        masked, world_state = self._masked, self._world_state

        def flat(obs) -> list:
            return [agent_part(obs, i, a).reshape(w, -1).astype(jnp.float32) for i, a in enumerate(agents)]

        def extras(state) -> list:
            out = []
            if masked:
                avail = jax.vmap(self._mask_fn)(state)
                out += [agent_part(avail, i, a).reshape(w, -1).astype(jnp.float32) for i, a in enumerate(agents)]
            return out

        def world(state):
            return [jax.vmap(lambda s: _world_state(env, s))(state).reshape(w, -1).astype(jnp.float32)] if world_state else []

        def reset(key):
            key, sub = jax.random.split(key)
            obs, state = jax.vmap(env.reset)(jax.random.split(sub, w))
            o = flat(obs)
            zeros = jnp.zeros((w, len(agents) + 2), jnp.float32)
            ws = world(state)
            return key, state, jnp.concatenate(o + o + [zeros] + extras(state) + ws + ws, axis=1)

        # Actions come as one [W, D] array: each agent's action flattened, in agent order (agents' action shapes may
        # differ: simple_world_comm's leader says more than the others).
        act_shapes = {a: tuple(self._act_spaces[a].shape) for a in agents}
        act_offsets = dict(zip(agents, np.cumsum([0] + [int(np.prod(act_shapes[a])) for a in agents]).tolist()))

        def agent_action(actions, a):
            block = actions[:, act_offsets[a]:act_offsets[a] + int(np.prod(act_shapes[a]))].reshape((w,) + act_shapes[a])
            return block.astype(jnp.int32) if self._discrete[a] else block

        def step(key, state, actions):
            key, k_step, k_reset = jax.random.split(key, 3)
            acts = {a: agent_action(actions, a) for a in agents}
            obs, reached, rewards, dones, _ = jax.vmap(env.step_env)(jax.random.split(k_step, w), state, acts)
            fresh_obs, fresh = jax.vmap(env.reset)(jax.random.split(k_reset, w))
            done = dones["__all__"]
            truncated = done & (_step_count(reached) >= max_steps) if max_steps is not None else jnp.zeros_like(done)
            terminated = done & ~truncated

            def pick(new, old):
                return jnp.where(done.reshape((w,) + (1,) * (new.ndim - 1)), new, old)

            state = jax.tree.map(pick, fresh, reached)
            final_ws = world(reached)
            cols = [pick(n, o) for n, o in zip(flat(fresh_obs), flat(obs))] + flat(obs)
            cols.append(jnp.stack([agent_part(rewards, i, a) for i, a in enumerate(agents)], axis=1).astype(jnp.float32))
            cols.append(jnp.stack([terminated, truncated], axis=1).astype(jnp.float32))
            return key, state, jnp.concatenate(cols + extras(state) + world(state) + final_ws, axis=1)

        return jax.jit(reset), jax.jit(step), step

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
