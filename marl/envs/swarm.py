"""A toy batched simulator: point agents steering to their own goals, O(worlds x agents) tensor work per step.

A complete `BatchedEnv` (`marl.envs.batched`) to copy from, and what tests and
`benchmarks/speed/agent_scaling.py` use where a simulator's own cost must not set the curve (VMAS's
collision checks grow with the square of the agent count). `stacked=True` hands out one
[worlds, agents, ...] tensor each for observations, actions and rewards; `False` a dict of
[worlds, ...] views per agent. Register it for the batched path with

    marl.register_batched_env("swarm", lambda env_config, worlds, seed, device: Swarm(worlds, **env_config))
"""

from __future__ import annotations

import gymnasium
import torch

from marl.envs.batched import BatchedEnv, BatchedStep


class Swarm(BatchedEnv):
    """`n` point agents per world, each steering to its own goal; episodes of `max_steps` steps."""

    name = "swarm"

    def __init__(self, num_worlds: int, n: int = 3, max_steps: int = 50, seed: int | None = 0, device="cpu",
                 stacked: bool = False):
        self.num_worlds, self.device, self.max_steps = num_worlds, torch.device(device), max_steps
        self.stacked = stacked
        self.agents = [f"agent_{i}" for i in range(n)]
        box = gymnasium.spaces.Box(-1.0, 1.0, (2,))
        obs = gymnasium.spaces.Box(-float("inf"), float("inf"), (4,))
        super().__init__(dict.fromkeys(self.agents, obs), dict.fromkeys(self.agents, box))
        self.gen = torch.Generator().manual_seed(seed or 0)
        self.pos = torch.zeros(num_worlds, n, 2)
        self.vel = torch.zeros(num_worlds, n, 2)
        self.goal = torch.zeros(num_worlds, n, 2)
        self.t = torch.zeros(num_worlds, dtype=torch.int64)

    def _reset(self, worlds: torch.Tensor) -> None:
        k = int(worlds.sum())
        self.pos[worlds] = torch.rand(k, len(self.agents), 2, generator=self.gen) * 2 - 1
        self.goal[worlds] = torch.rand(k, len(self.agents), 2, generator=self.gen) * 2 - 1
        self.vel[worlds] = 0.0
        self.t[worlds] = 0

    def _obs(self) -> dict[str, torch.Tensor] | torch.Tensor:
        obs = torch.cat([self.goal - self.pos, self.vel], dim=2)  # [W, n, 4]
        return obs if self.stacked else dict(zip(self.agents, obs.unbind(1)))

    def reset(self, seed=None) -> dict[str, torch.Tensor]:
        self._reset(torch.ones(self.num_worlds, dtype=torch.bool))
        self._last_obs = self._obs()
        return self._last_obs

    def get_state(self) -> dict:
        """Everything the next steps depend on: positions, velocities, goals, step counts, the generator."""
        return {"pos": self.pos.numpy().copy(), "vel": self.vel.numpy().copy(), "goal": self.goal.numpy().copy(),
                "t": self.t.numpy().copy(), "generator": self.gen.get_state().numpy().copy()}

    def set_state(self, state: dict) -> None:
        self.pos, self.vel = torch.as_tensor(state["pos"]).clone(), torch.as_tensor(state["vel"]).clone()
        self.goal, self.t = torch.as_tensor(state["goal"]).clone(), torch.as_tensor(state["t"]).clone()
        self.gen.set_state(torch.as_tensor(state["generator"]))

    def step(self, actions: dict[str, torch.Tensor]) -> BatchedStep:
        a = (actions if self.stacked else torch.stack([actions[x] for x in self.agents], dim=1)).clamp(-1.0, 1.0)
        self.vel = 0.8 * self.vel + 0.1 * a
        self.pos = self.pos + 0.1 * self.vel
        dist = (self.goal - self.pos).norm(dim=2)  # [W, n]
        self.t += 1
        truncated = self.t >= self.max_steps
        terminated = torch.zeros_like(truncated)
        rewards = -dist if self.stacked else dict(zip(self.agents, (-dist).unbind(1)))
        final_obs = final_state = None
        if bool(truncated.any()):
            final_obs = self._obs()
            self._reset(truncated)
        self._last_obs = self._obs()
        return BatchedStep(self._last_obs, rewards, terminated, truncated, final_obs, final_state)
