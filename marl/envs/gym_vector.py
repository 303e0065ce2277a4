"""Gymnasium vector envs as a `BatchedEnv`: one agent (`agent_0`) over `num_worlds` copies of a Gymnasium id.

Used when `env_runners.batched: true` names a Gymnasium id (`CartPole-v1`, `module:Id`): the env is
`gymnasium.make_vec(id, num_worlds, vectorization_mode="sync")` with `env_config` as the env's kwargs,
autoreset mode SAME_STEP (a world that ends is reset inside the step and its final observation comes in
the same step's `infos["final_obs"]`, which is what the contract asks for). Box observations; Discrete
or Box actions. The copies step one after another in Python ("sync"), so this path saves the runner's
per-world Python work, not the simulator's. A vector env's state cannot be saved: a restored run starts
fresh episodes.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch

from marl.envs.base import EnvError
from marl.envs.batched import BatchedEnv, BatchedStep
from gymnasium.vector import AutoresetMode

AGENT = "agent_0"


def is_gymnasium_id(name: str) -> bool:
    """A registered Gymnasium id, or `module:Id` (Gymnasium imports the module, which registers it)."""
    return ":" in name or name in gymnasium.envs.registry


class GymVectorEnv(BatchedEnv):
    """`num_worlds` copies of a single-agent Gymnasium env, stepped as one `BatchedEnv` (agent `agent_0`)."""

    agents = [AGENT]

    def __init__(self, name: str, env_config: dict[str, Any], num_worlds: int, seed: int | None = None, device=None):
        try:
            self.env = gymnasium.make_vec(name, num_worlds, vectorization_mode="sync",
                                          vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **env_config)
        except TypeError as err:
            bad = [k for k in env_config if f"'{k}'" in str(err)]
            what = f"env_config key(s) {bad}" if bad else "its env_config"
            raise EnvError(f"env {name!r} rejected {what}: {err}") from None
        except gymnasium.error.Error as err:
            raise EnvError(f"env {name!r}: {err}") from None
        obs_space, act_space = self.env.single_observation_space, self.env.single_action_space
        if not isinstance(obs_space, gymnasium.spaces.Box):
            raise EnvError(f"env {name!r}: the batched path takes Box observations, not {obs_space}; "
                           "use env_runners.batched: false")
        if not isinstance(act_space, (gymnasium.spaces.Discrete, gymnasium.spaces.Box)):
            raise EnvError(f"env {name!r}: the batched path takes Discrete or Box actions, not {act_space}; "
                           "use env_runners.batched: false")
        self.name, self.num_worlds = name, num_worlds
        self.device = torch.device(device or "cpu")
        self._seed = seed
        self._discrete = isinstance(act_space, gymnasium.spaces.Discrete)
        self._start = int(act_space.start) if self._discrete else 0
        super().__init__({AGENT: obs_space}, {AGENT: act_space})

    def _tensor(self, obs: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(obs, np.float32), device=self.device)

    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        if seed is None:  # the first reset takes the runner's seed; later ones continue the copies' generators
            seed, self._seed = self._seed, None
        obs, _ = self.env.reset(seed=seed)
        self._last_obs = {AGENT: self._tensor(obs)}
        return self._last_obs

    def step(self, actions: dict[str, torch.Tensor]) -> BatchedStep:
        act = actions[AGENT].cpu().numpy()
        act = act.astype(np.int64) + self._start if self._discrete else act.astype(np.float32)
        obs, rewards, terminated, truncated, infos = self.env.step(act)
        terminated = torch.as_tensor(terminated, dtype=torch.bool, device=self.device)
        truncated = torch.as_tensor(truncated, dtype=torch.bool, device=self.device) & ~terminated
        self._last_obs = {AGENT: self._tensor(obs)}
        final_obs = final_state = None
        ended = np.asarray(infos.get("_final_obs", ()), bool)
        if ended.any():
            reached = np.array(obs, np.float32, copy=True)
            reached[ended] = np.stack([infos["final_obs"][k] for k in np.flatnonzero(ended)])
            final_obs = {AGENT: self._tensor(reached)}
            final_state = self.state(final_obs)
        rewards = torch.as_tensor(np.asarray(rewards, np.float32), device=self.device)
        return BatchedStep(self._last_obs, {AGENT: rewards}, terminated, truncated, final_obs, final_state)

    def close(self) -> None:
        self.env.close()
