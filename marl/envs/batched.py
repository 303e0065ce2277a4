"""Batched envs: one object steps `num_worlds` worlds at once, on tensors (VMAS, JaxMARL, Gymnasium vector envs).

The contract, beside `MultiAgentEnv`'s dict API (not instead of it):

- `agents`: the fixed agent list. Every agent acts at every step of every world.
- `observation_space(agent)`, `action_space(agent)`: one world's Gymnasium spaces.
- `num_worlds`; `device`: the torch device every tensor lives on.
- `reset(seed) -> {agent: Tensor[W, *obs_shape]}`: every world starts an episode.
- `step({agent: Tensor[W, *act_shape]}) -> BatchedStep`: one step of every world. Discrete actions
  are int64 [W], Box actions float32 [W, *shape]. Worlds whose episode ended are reset inside the
  step (auto-reset): `obs` holds their first observation of the next episode, `final_obs` the
  observation they reached (a truncated world bootstraps its value from it); `final_obs` is None
  exactly when no world ended at this step (runners skip the end-of-episode work then).
- `state() -> Tensor[W, S]`: the global state of each world (centralised critics), by default
  every agent's observation joined in agent order; `BatchedStep.final_state` is the state reached
  by worlds that ended.
- `action_masks() -> {agent: Tensor[W, n]} | None`: legal actions (1 = legal), None if all are.
- `get_state() -> dict | None` / `set_state(state)`: the whole simulator (NumPy arrays), for exact
  resume; None (the default) means it cannot be saved, and a restored runner starts fresh episodes.

Flags are per world: an episode ends for all agents of a world at once. Rewards are float32 [W] per
agent. `stacked = True` (agents alike in spaces): every per-agent dict above is instead ONE tensor
with the agents on axis 1 in `agents` order: observations [W, N, ...], actions [W, N, ...], rewards
[W, N], masks [W, N, n] (no Python object per agent per step: what 1,000 agents per world need).
`BatchedEnvRunner` (`marl.runners.batched_runner`) drives any object that keeps this contract.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium
import torch

from marl.envs.base import EnvError


@dataclass
class BatchedStep:
    """What one step of all worlds returns (see the module docstring)."""

    obs: dict[str, torch.Tensor] | torch.Tensor  # [W, ...] per agent (stacked: [W, N, ...]); worlds that ended:
    # the next episode's first observation
    rewards: dict[str, torch.Tensor] | torch.Tensor  # [W] float32 per agent (stacked: [W, N])
    terminated: torch.Tensor  # [W] bool
    truncated: torch.Tensor  # [W] bool (False where terminated)
    final_obs: dict[str, torch.Tensor] | torch.Tensor | None = None  # the observation reached, where a world ended
    final_state: torch.Tensor | None = None  # the global state reached, valid where a world ended

    @property
    def done(self) -> torch.Tensor:
        return self.terminated | self.truncated


def per_world(values: torch.Tensor, env: str, what: str) -> torch.Tensor:
    """A [W] (or [W, 1], as some VMAS scenarios give rewards) tensor as [W]; anything else is one clear error."""
    if values.dim() == 1 or (values.dim() == 2 and values.shape[1] == 1):
        return values.reshape(-1)
    raise EnvError(f"env {env!r}: {what} has shape {tuple(values.shape)}; expected one value per world [worlds]")


class BatchedEnv:
    """Base of the batched adapters: spaces per agent, the global state as the observations joined."""

    agents: list[str]
    num_worlds: int
    device: torch.device
    name: str = "batched env"
    stacked: bool = False  # True: tensors [W, N, ...] with the agents on axis 1 instead of {agent: [W, ...]}

    def __init__(self, obs_spaces: dict[str, gymnasium.Space], act_spaces: dict[str, gymnasium.Space]):
        self._obs_spaces, self._act_spaces = obs_spaces, act_spaces
        self.possible_agents = list(self.agents)

    def observation_space(self, agent: str) -> gymnasium.Space:
        return self._space(self._obs_spaces, agent)

    def action_space(self, agent: str) -> gymnasium.Space:
        return self._space(self._act_spaces, agent)

    def _space(self, spaces: dict, agent: str) -> gymnasium.Space:
        try:
            return spaces[agent]
        except KeyError:
            raise EnvError(f"env {self.name!r} has no agent {agent!r}; agents: {self.agents}") from None

    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def step(self, actions: dict[str, torch.Tensor]) -> BatchedStep:
        raise NotImplementedError

    def state(self, obs: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """[W, S]: each world's agents' observations (`obs`, default the last ones handed out) joined."""
        obs = self._last_obs if obs is None else obs
        if self.stacked:
            return obs.reshape(self.num_worlds, -1).float()
        return torch.cat([obs[a].reshape(self.num_worlds, -1).float() for a in self.agents], dim=1)

    def action_masks(self) -> dict[str, torch.Tensor] | None:
        return None

    def get_state(self) -> dict | None:
        return None

    def set_state(self, state: dict) -> None:
        raise EnvError(f"env {self.name!r} cannot restore a saved simulator state")

    def close(self) -> None:
        pass

    # Set by `reset` and `step` of subclasses: what `state()` joins by default.
    _last_obs: dict[str, torch.Tensor] = {}
