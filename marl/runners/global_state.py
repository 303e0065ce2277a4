"""The global state a centralised critic sees (MAPPO): one vector per env step.

Where the env provides `state()` (PettingZoo's MPE envs do) that is the
state. Otherwise it is the joined observations of all the env's possible
agents at the same env step, flattened in `possible_agents` order, with zeros
for agents that do not observe at that step (turn-based games, agents that
already ended). A state of uint8 pixels (a uint8 `state()`, or every agent's
observation a uint8 image) stays uint8 in batches (the critic scales it to
[0, 1]); any other is float32. A `state()` that is a large frame (a side over the size
`environment.wrappers: auto` resizes observations from: cooperative pong's 280x480 screen) gives way to the
agents' frames joined where they observe frames (resized by then), which the critic reads through one conv
stack, rather than a 400k-wide vector into its first layer.
"""

from __future__ import annotations

import logging

import gymnasium as gym
import numpy as np

from marl.envs.validation import EnvOutputError
from marl.envs.wrappers import is_large_frame
from marl.modules.spaces import image_shape, is_masked_space, observation_part

ENV_STATE = "env_state"
JOINED_OBS = "joined_obs"

log = logging.getLogger(__name__)


def probe_global_state(env) -> dict:
    """{source, dim, num_agents, dtype[, frame]} of an env's global state; resets the env once to ask for `state()`.
    `frame`: where the state is the agents' uint8 frames joined and the frames are alike, one frame's shape."""
    env.reset(seed=0)
    state = env.state()
    agents = list(env.possible_agents)
    parts = [observation_part(env.observation_space(a)) for a in agents]
    frames = all(image_shape(p) is not None and p.dtype == np.uint8 for p in parts)
    if state is not None:
        state = np.asarray(state)
        if frames and is_large_frame(state):  # (an array has the shape and dtype the check reads)
            log.info("%s: state() is a %s frame; the centralised critic reads the agents' frames joined instead",
                     env.metadata.get("name", "?"), "x".join(map(str, state.shape)))
        else:
            dtype = "uint8" if state.dtype == np.uint8 else "float32"
            return {"source": ENV_STATE, "dim": int(state.size), "num_agents": len(agents), "dtype": dtype}
    dim = sum(int(gym.spaces.flatdim(p)) for p in parts)
    spec = {"source": JOINED_OBS, "dim": dim, "num_agents": len(agents), "dtype": "uint8" if frames else "float32"}
    if frames and len({p.shape for p in parts}) == 1:  # frames alike: a critic can read each through one conv stack
        spec["frame"] = [int(n) for n in parts[0].shape]
    return spec


class GlobalState:
    """Reads the global state of one env copy; `spec` comes from `probe_global_state`."""

    def __init__(self, env, spec: dict):
        self.source, self.dim = spec["source"], int(spec["dim"])
        self.dtype = np.dtype(spec.get("dtype", "float32"))
        self.name = env.metadata.get("name", "?")
        self.slots = {}  # agent -> (offset, width, observation space, masked)
        offset = 0
        for agent in env.possible_agents:
            space = env.observation_space(agent)
            part = observation_part(space)
            width = int(gym.spaces.flatdim(part))
            self.slots[agent] = (offset, width, part, is_masked_space(space))
            offset += width

    def __call__(self, env, obs: dict) -> np.ndarray:
        if self.source == ENV_STATE:
            state = env.state()
            if state is None:
                raise EnvOutputError(f"env '{self.name}' returned no state() mid-episode, though it had one when probed")
            state = np.asarray(state, dtype=self.dtype).reshape(-1)
            if state.size != self.dim:
                raise EnvOutputError(f"env '{self.name}' state() has {state.size} values; it had {self.dim} when probed")
            return state
        out = np.zeros(self.dim, self.dtype)
        for agent, ob in obs.items():
            slot = self.slots.get(agent)
            if slot is None or ob is None:
                continue
            offset, width, part, masked = slot
            value = ob["observation"] if masked else ob
            if isinstance(part, gym.spaces.Box):
                out[offset : offset + width] = np.asarray(value, self.dtype).reshape(-1)
            else:
                out[offset : offset + width] = gym.spaces.flatten(part, value)
        return out


def state_rows(states: list | None, envs_idx) -> tuple[tuple | None, np.ndarray | None]:
    """((states of the block's env copies, each row's place among them), each row's state) of a block of rows
    whose env copies are `envs_idx`; `states[k]` is env copy k's state. (None, None) without states.

    The pair is what the collector stores (one state per env copy and step); the per-row array
    feeds this step's forward pass only."""
    if states is None:
        return None, None
    copies, inverse = np.unique(np.asarray(envs_idx), return_inverse=True)
    block = np.stack([states[k] for k in copies])
    return (block, inverse), block[inverse]
