"""A JaxMARL env's packed output and the jitted calls that make it (`marl.envs.jaxmarl.JaxMarlEnv` hands out views).

One float32 row per world holds, in this order: next observations, observations reached (each agent's columns
side by side, then all agents as one slice), rewards, the terminated/truncated flags, action masks (where the env
has them) and the global states now and reached (where the env has `get_world_state`). `packed_layout` names the
columns; `compile_steps` builds the reset and the step (vmapped over the worlds, auto-reset included) that fill it.
"""

from __future__ import annotations

import numpy as np


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


def world_state(env, state):
    """`env.get_world_state(state)` as one flat array: envs that give one entry per agent (the FACMAC MPE tasks) have
    theirs joined in the env's agent order."""
    ws = env.get_world_state(state)
    if isinstance(ws, dict):
        import jax.numpy as jnp

        return jnp.concatenate([ws[a].reshape(-1) for a in env.agents])
    return ws


def packed_layout(jax, env, agents: list[str], obs_spaces: dict, act_spaces: dict, masked: bool,
                  has_world_state: bool) -> tuple[dict[str, slice], int]:
    """(columns, width): next obs, obs reached, masks (per agent, `obs/<a>`; all agents, `obs`), rewards, flags, states."""
    columns: dict[str, slice] = {}
    offset = 0

    def take(key: str, width: int) -> None:
        nonlocal offset
        columns[key] = slice(offset, offset + width)
        offset += width

    def take_agents(part: str, width) -> None:  # each agent's columns, side by side, then all of them
        start = offset
        for a in agents:
            take(f"{part}/{a}", width(a))
        columns[part] = slice(start, offset)

    for part in ("obs", "final"):
        take_agents(part, lambda a: int(np.prod(obs_spaces[a].shape)))
    take("rewards", len(agents))
    take("flags", 2)  # terminated, truncated
    if masked:
        take_agents("mask", lambda a: int(act_spaces[a].n))
    if has_world_state:
        shape = jax.eval_shape(lambda k: world_state(env, env.reset(k)[1]), jax.random.PRNGKey(0)).shape
        take("state", int(np.prod(shape)))
        take("final_state", int(np.prod(shape)))
    return columns, offset


def compile_steps(jax, env, agents: list[str], w: int, act_spaces: dict, discrete: dict[str, bool], mask_fn,
                  has_world_state: bool):
    """(jitted reset, jitted step, the step's body un-jitted) over `w` worlds; `mask_fn`: the env's legal actions
    (None: no masks in the packed output)."""
    import jax.numpy as jnp

    max_steps = getattr(env, "max_steps", None)

    def flat(obs) -> list:
        return [agent_part(obs, i, a).reshape(w, -1).astype(jnp.float32) for i, a in enumerate(agents)]

    def extras(state) -> list:
        out = []
        if mask_fn is not None:
            avail = jax.vmap(mask_fn)(state)
            out += [agent_part(avail, i, a).reshape(w, -1).astype(jnp.float32) for i, a in enumerate(agents)]
        return out

    def world(state):
        return [jax.vmap(lambda s: world_state(env, s))(state).reshape(w, -1).astype(jnp.float32)] if has_world_state else []

    def reset(key):
        key, sub = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(sub, w))
        o = flat(obs)
        zeros = jnp.zeros((w, len(agents) + 2), jnp.float32)
        ws = world(state)
        return key, state, jnp.concatenate(o + o + [zeros] + extras(state) + ws + ws, axis=1)

    # Actions come as one [W, D] array: each agent's action flattened, in agent order (agents' action shapes may
    # differ: simple_world_comm's leader says more than the others).
    act_shapes = {a: tuple(act_spaces[a].shape) for a in agents}
    act_offsets = dict(zip(agents, np.cumsum([0] + [int(np.prod(act_shapes[a])) for a in agents]).tolist()))

    def agent_action(actions, a):
        block = actions[:, act_offsets[a]:act_offsets[a] + int(np.prod(act_shapes[a]))].reshape((w,) + act_shapes[a])
        return block.astype(jnp.int32) if discrete[a] else block

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
