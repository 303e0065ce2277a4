"""The inputs of one policy's forward pass, built in one place for acting and for bootstrapping.

`ModuleInputs` turns the raw observations of a block of rows (one policy's
acting agents, or the rows whose trajectory piece ends) into the tensors the
module declares in `RLModule.inputs`: the preprocessed `obs`, the
`action_mask` of masked spaces, `agent_index`, the global `state`, and for a
stateful module its `state_in` and `episode_start`. Nothing a module does not
declare is computed for it.

`AgentStates` keeps a stateful module's state per (env copy, agent): reset
when the env copy resets (an agent's first step in an episode gets the
initial state and `episode_start`), advanced only when the agent acts.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.modules.rl_module import MODULE_INPUTS
from marl.errors import ConfigError  # a module or columns that do not fit the algorithm: one clear line


class ModuleInputs:
    def __init__(self, module, connectors, policy_id: str):
        declared = tuple(module.inputs)
        unknown = [name for name in declared if name not in MODULE_INPUTS]
        if unknown:
            raise ConfigError(
                f"policy '{policy_id}': module {type(module).__name__} declares unknown input(s) {unknown} "
                f"in `inputs`; runners provide {list(MODULE_INPUTS)}"
            )
        self.connectors = connectors  # the policy's env->module pipeline (`marl.connectors.PolicyConnectors`)
        self.wants_mask = "action_mask" in declared
        self.wants_agent_index = "agent_index" in declared
        self.wants_state = "state" in declared  # the env's global state
        initial = module.get_initial_state()
        # One agent's initial state as NumPy rows (what the runner stores and stacks).
        self.initial_state = {name: np.asarray(value.detach().cpu().numpy()) for name, value in initial.items()}
        self.stateful = bool(self.initial_state)

    def observe(self, raw_obs: list, ctx) -> tuple[np.ndarray, np.ndarray | None]:
        """(float32 obs [B, dim], action mask [B, n] or None) of raw env observations, through the
        env->module pipeline; `ctx` (`marl.connectors.RowContext`) says which rows and whether statistics update."""
        return self.connectors.to_module(raw_obs, ctx)

    def arrays(self, raw_obs: list, ctx, agent_index=None, global_state=None) -> tuple[dict, np.ndarray, np.ndarray | None]:
        """A stateless module's inputs as NumPy arrays (what a `NumpyActor` reads), the obs and the mask."""
        obs, mask = self.connectors.env_to_module(raw_obs, ctx)  # = observe(), one call less per step
        arrays = {"obs": obs}
        if mask is not None and self.wants_mask:
            arrays["action_mask"] = mask
        if self.wants_agent_index:
            arrays["agent_index"] = np.asarray(agent_index, dtype=np.int64)
        if self.wants_state:
            arrays["state"] = global_state
        return arrays, obs, mask

    def __call__(self, raw_obs: list, ctx, agent_index=None, global_state=None, state_in=None,
                 episode_start=None) -> tuple[dict, np.ndarray, np.ndarray | None]:
        """(module inputs, preprocessed obs, action mask or None) of a block of rows.

        `agent_index`, `global_state` ([B, dim]) and `state_in`/`episode_start` (from
        `AgentStates.gather`) are read only when the module declares them.
        """
        arrays, obs, mask = self.arrays(raw_obs, ctx, agent_index, global_state)
        inputs = {name: torch.from_numpy(value) for name, value in arrays.items()}
        if self.stateful:
            inputs["state_in"] = {name: torch.from_numpy(value) for name, value in state_in.items()}
            inputs["episode_start"] = torch.from_numpy(episode_start)
        return inputs, obs, mask


class AgentStates:
    """A stateful module's state per (env copy, agent), as NumPy rows."""

    def __init__(self, initial: dict[str, np.ndarray], num_envs: int, policy_id: str):
        self.initial = initial
        self.policy_id = policy_id
        self.by_env: list[dict[str, dict[str, np.ndarray]]] = [{} for _ in range(num_envs)]

    def reset(self, k: int) -> None:
        """Env copy k starts new episodes: each agent's next step starts from the initial state."""
        self.by_env[k] = {}

    def gather(self, envs_idx: list, agents: list) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(state_in {name: [B, ...]}, episode_start [B]) of a block of rows."""
        rows = [self.by_env[k].get(agent) for k, agent in zip(envs_idx, agents)]
        start = np.fromiter((r is None for r in rows), dtype=np.bool_, count=len(rows))
        initial = self.initial
        state_in = {name: np.stack([initial[name] if r is None else r[name] for r in rows]) for name in initial}
        return state_in, start

    def scatter(self, envs_idx: list, agents: list, state_out) -> dict[str, np.ndarray]:
        """Stores the module's `state_out` per row (the acting agents' states advance); returns it as NumPy."""
        if not isinstance(state_out, dict) or set(state_out) != set(self.initial):
            got = f"state_out {sorted(state_out)}" if isinstance(state_out, dict) else "no state_out dict"
            raise ConfigError(
                f"policy '{self.policy_id}': the module is stateful (get_initial_state() has {sorted(self.initial)}) "
                f"but its forward pass returned {got}; it must return 'state_out' with the same names"
            )
        n = len(agents)
        arrays = {}
        for name, value in state_out.items():
            arr = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
            if arr.shape != (n,) + self.initial[name].shape:
                raise ConfigError(
                    f"policy '{self.policy_id}': state_out['{name}'] has shape {arr.shape}; "
                    f"expected {(n,) + self.initial[name].shape} (one row per acting agent)"
                )
            arrays[name] = arr.astype(self.initial[name].dtype, copy=True)
        for j, (k, agent) in enumerate(zip(envs_idx, agents)):
            self.by_env[k][agent] = {name: arr[j] for name, arr in arrays.items()}
        return arrays

    def get_state(self) -> list[dict]:
        return [{agent: {n: v.copy() for n, v in state.items()} for agent, state in env.items()} for env in self.by_env]

    def set_state(self, saved: list[dict]) -> None:
        for k, env in enumerate(saved[: len(self.by_env)]):
            self.by_env[k] = {
                agent: {n: np.asarray(v, self.initial[n].dtype).reshape(self.initial[n].shape) for n, v in state.items()}
                for agent, state in env.items()
            }
