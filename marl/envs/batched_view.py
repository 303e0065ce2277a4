"""`SingleWorldView`: a `BatchedEnv` of one world presented through the dict API (`MultiAgentEnv`).

What `make_env("jaxmarl.X")` returns: the config checks probe spaces and global state through it,
evaluation and the dict-path runners (`env_runners.batched: false`, recurrent modules) step it.

- `reset()` hands out NumPy observation dicts. A step that ends the episode returns the observation
  the world reached (the batched env already auto-reset it); the next `reset()` hands out the
  auto-reset first observation instead of resetting again (a `seed` forces a real reset).
- Action masks (`BatchedEnv.action_masks()`) follow the PettingZoo convention marl's dict path
  reads: each agent's observation space is `Dict(observation=..., action_mask=Box(0, 1, (n,), int8))`
  and each observation `{"observation": ..., "action_mask": ...}`. In the step that ends an episode
  the mask beside the final observation is the next episode's first (nothing acts on it).
- `state()`: the batched env's global state of the world (after a step that ended it: the state reached).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch

from marl.envs.base import ALL, AgentID, InfoDict, MultiAgentEnv, ObsDict, StepResult
from marl.envs.batched import BatchedEnv


def dict_observation_space(env: BatchedEnv, agent: AgentID, masked: bool) -> gymnasium.Space:
    """One agent's observation space as the dict API presents it: where the env gives action masks, PettingZoo's
    `Dict(observation=..., action_mask=Box(0, 1, (n,), int8))`."""
    space = env.observation_space(agent)
    if not masked:
        return space
    n = int(env.action_space(agent).n)
    return gymnasium.spaces.Dict({"observation": space, "action_mask": gymnasium.spaces.Box(0, 1, (n,), np.int8)})


class SingleWorldView(MultiAgentEnv):
    """World 0 of `env` (a `BatchedEnv` with `num_worlds == 1`) as a `MultiAgentEnv`."""

    def __init__(self, env: BatchedEnv) -> None:
        if env.num_worlds != 1:
            raise ValueError(f"SingleWorldView presents one world; {env.name!r} has {env.num_worlds}")
        self.env = env
        self.possible_agents = list(env.agents)
        self.metadata = {"name": env.name, "turn_based": False}
        self._masked = env.action_masks() is not None
        self._discrete = {a: isinstance(env.action_space(a), gymnasium.spaces.Discrete) for a in env.agents}
        self._pending: ObsDict | None = None  # the auto-reset observation of the episode that ended
        self._state: np.ndarray | None = None

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        return dict_observation_space(self.env, agent, self._masked)

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        return self.env.action_space(agent)

    def _obs(self, obs: dict[str, torch.Tensor]) -> ObsDict:
        out = {a: obs[a][0].cpu().numpy() for a in self.possible_agents}
        if self._masked:
            masks = self.env.action_masks()
            out = {a: {"observation": o, "action_mask": masks[a][0].cpu().numpy().astype(np.int8)} for a, o in out.items()}
        return out

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        if self._pending is not None and seed is None:
            obs, self._pending = self._pending, None
        else:
            self._pending = None
            obs = self._obs(self.env.reset(seed=seed))
        self._state = None
        return obs, {}

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        joint = {a: torch.tensor([int(actions[a])], dtype=torch.int64) if self._discrete[a]
                 else torch.as_tensor(np.asarray(actions[a], np.float32)[None])
                 for a in self.possible_agents}
        out = self.env.step(joint)
        term, trunc = bool(out.terminated[0]), bool(out.truncated[0])
        self._state = None
        if term or trunc:
            self._pending = self._obs(out.obs)
            obs = self._obs(out.final_obs)
            if out.final_state is not None:
                self._state = out.final_state[0].cpu().numpy().copy()
        else:
            obs = self._obs(out.obs)
        done = term or trunc
        rewards = {a: float(out.rewards[a][0]) for a in self.possible_agents}
        return (obs, rewards, {**dict.fromkeys(self.possible_agents, term), ALL: done},
                {**dict.fromkeys(self.possible_agents, trunc), ALL: done}, {})

    def state(self) -> np.ndarray:
        if self._state is not None:
            return self._state
        return self.env.state()[0].cpu().numpy().copy()

    def np_random_source(self):
        return None  # the batched env keeps its own generator (saved by get_state)

    def close(self) -> None:
        self.env.close()
