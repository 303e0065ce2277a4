"""One policy's side of the batched runner (`BatchedPolicy`), and what the batched path does not run (`unsupported`).

Split from `batched_runner.py`, which drives the env and the fragment: this file holds the per-policy
pieces it resolves once (agents as index tensors, module inputs, action conversion in torch, the
policy's preallocated fragment).
"""

from __future__ import annotations

import numpy as np
import torch

from marl.connectors.build import env_to_module_pipeline, module_to_env_pipeline, piece_specs
from marl.connectors.module_to_env import ClipActions, UnsquashActions
from marl.data.columns import check_columns, columns_for
from marl.errors import ConfigError
from marl.runners.actor_basics import no_values, torch_act
from marl.runners.batched_fragment import PolicyFragment


def unsupported(config) -> str | None:
    """Why the batched path cannot run `config` (None: it can), judged from the config alone."""
    run, ma = config.env_runners_cfg, config.multi_agent_cfg
    if run.batch_mode == "complete_episodes":
        return "env_runners.batch_mode: complete_episodes"
    if ma.self_play:
        return "multi_agent.self_play (its pool rebinds agents to policies every episode)"
    if run.observation_filter != "none":
        return f"env_runners.observation_filter: {run.observation_filter}"
    for pid in config.policy_specs():
        plan = config.plan_for(pid)
        if not plan.capabilities.batched:  # the algorithm's record (marl.config.capabilities)
            return f"policy '{pid}': {plan.algo_name} (its capabilities: batched false)"
        if plan.model.get("recurrent"):
            return f"policy '{pid}': model.recurrent (stateful modules)"
        for pipeline in ("env_to_module", "module_to_env"):
            if piece_specs(config, pid, pipeline):
                return f"policy '{pid}': connectors.{pipeline} pieces"
    return None


class BatchedPolicy:
    """One policy's side of the runner: its agents, module, action conversion and fragment."""

    def __init__(self, runner, pid: str, spec, agents: list[str]):
        config, device = runner.config, runner.device
        self.pid, self.agents = pid, agents
        self.module = runner.module[pid]
        if self.module.get_initial_state():
            raise ConfigError(f"policy '{pid}': stateful modules run on the dict path (env_runners.batched: false)")
        pipe = env_to_module_pipeline(config, pid, spec.observation_space, spec.action_space, 0)
        if pipe.pieces:
            raise ConfigError(f"policy '{pid}': env->module connector pieces run on the dict path (env_runners.batched: false)")
        self.obs_shape = tuple(pipe.obs_shape)
        self.action_fns = []  # Box actions: the clip/unsquash pieces, applied in torch before the env
        to_env = module_to_env_pipeline(config, pid, spec.action_space)
        for piece in to_env.pieces.values():  # implicit ones only (`unsupported` refused the user's)
            if not isinstance(piece, (ClipActions, UnsquashActions)):
                raise ConfigError(f"policy '{pid}': module->env piece {type(piece).__name__} runs on the dict path "
                                  "(env_runners.batched: false)")
            fn = piece.on_tensors(device)
            if fn is not None:
                self.action_fns.append(fn)
        index = [runner.agent_index[a] for a in agents]
        self.index = torch.tensor(index, dtype=torch.int64, device=device)
        self.all_agents = index == list(range(len(runner.possible_agents)))  # every agent, in the env's order
        self.rows_agent_index = self.index.repeat(runner.num_worlds)  # rows (world, agent): the module's agent_index
        inputs = tuple(self.module.inputs)
        self.wants_state, self.wants_agent_index = "state" in inputs, "agent_index" in inputs
        self.wants_mask = "action_mask" in inputs and runner.masked
        self.columns = check_columns(config.runner_columns(pid), pid)
        action_shape = tuple(to_env.shape)  # the module's action layout (ActionAdapter): int64 or float32 rows
        action_dtype = np.int64 if np.issubdtype(to_env.dtype, np.integer) else np.float32
        mask_dim = self.module.action_dim if runner.masked else None
        specs = columns_for(self.obs_shape, np.float32, action_shape, action_dtype, self.columns, mask_dim,
                            state_dim=runner.state_dim)
        self.fragment = PolicyFragment(runner.fragment_length, runner.num_worlds, index, specs, device)
        # On the CPU, the module's NumPy copy of its acting pass where it offers one (`env_runners.numpy_acting`):
        # the same draws from the same generator, and faster at every size measured here (simple_spread's 64x64
        # actor-critic: 45 against 81-107 us at 48 rows, 2.0-2.2 against 2.8-4.0 ms at 3,072; NumPy's tanh is
        # vectorised where torch's CPU tanh is not).
        use_numpy = config.env_runners_cfg.numpy_acting and device.type == "cpu"
        self.numpy_actor = self.module.numpy_actor() if use_numpy else None

    def stack(self, per_agent: dict[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """[W, A, ...] of this policy's agents' tensors (from a stacked env's [W, N, ...]: its agents' columns)."""
        if isinstance(per_agent, torch.Tensor):
            return per_agent if self.all_agents else per_agent[:, self.index]
        return torch.stack([per_agent[a] for a in self.agents], dim=1)

    def inputs(self, obs: torch.Tensor, state: torch.Tensor | None, mask: torch.Tensor | None) -> dict:
        """The module's inputs for rows (world, agent): obs [W, A, ...] -> [W*A, ...]."""
        w, a = obs.shape[:2]
        out = {"obs": obs.reshape(w * a, *self.obs_shape).float()}
        if self.wants_agent_index:
            out["agent_index"] = self.rows_agent_index
        if self.wants_state:
            out["state"] = state.repeat_interleave(a, dim=0)
        if self.wants_mask and mask is not None:
            out["action_mask"] = mask.reshape(w * a, -1)
        return out

    def to_env(self, actions: torch.Tensor) -> torch.Tensor:
        for fn in self.action_fns:  # in the pipeline's order, as the dict path applies them
            actions = fn(actions)
        return actions

    def act(self, inputs: dict, rng: torch.Generator, explore: bool, want_logp: bool, frozen: bool = False):
        """(actions, their log-probs or None unless `want_logp`, the value predictions or None) for the rows.

        `frozen`: the policy acts as a frozen population member (`ActorBasics.set_frozen_policies`): its
        inference pass, its distribution sampled."""
        module = self.module
        if self.numpy_actor is not None and (explore or frozen or not module.greedy_is_sampled):
            act, logp, values = self.numpy_actor.act({k: v.numpy() for k, v in inputs.items()}, rng, explore or frozen
                                                     or module.greedy_is_sampled)
            return torch.from_numpy(act), torch.from_numpy(logp), None if values is None else torch.from_numpy(values)
        out, dist, act = torch_act(module, inputs, rng, explore, frozen)
        return act, dist.logp(act) if want_logp else None, out.get("vf_preds")

    def values(self, inputs: dict) -> torch.Tensor:
        if self.numpy_actor is not None:
            values = self.numpy_actor.values({k: v.numpy() for k, v in inputs.items()})
            if values is not None:
                return torch.from_numpy(values)
        out = self.module.forward_exploration(inputs)
        if "vf_preds" not in out:
            raise no_values(self.pid, self.module)
        return out["vf_preds"]
