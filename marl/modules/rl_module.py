"""RLModule: the torch network of one policy, with its three forward passes.

- `forward_inference`: acting greedily (evaluation, deployment);
- `forward_exploration`: acting while sampling (also returns what the loss needs later, e.g. values);
- `forward_train`: the learner's pass, with gradients.

The contract runners rely on (one screen):

- Inputs are dicts of tensors. A module declares which ones it reads in
  `inputs` (a class or instance attribute); runners build exactly those, in one
  place (`marl.runners.module_inputs`): `obs` (flat float32, see
  `marl.modules.spaces`; image observations — a Box with 3 axes — keep their shape and
  dtype, uint8 included, when the module sets `keeps_image_obs`), `action_mask` (masked action spaces only, 1 = legal),
  `agent_index` (int64, the agent's index in the env's `possible_agents`),
  `state` (the env's global state at the step, `marl.runners.global_state`).
  Inputs are read-only: runners record them in the batch after the pass.
- Outputs: `action_dist_inputs` (what `action_dist` turns into a distribution);
  `forward_exploration` also returns `vf_preds` when the module has a value
  function (runners read it only when the algorithm asks for value columns).
- State (optional): `get_initial_state()` returns the state of one agent as a
  dict of tensors without batch axis; `{}` (the default) means stateless, and
  stateless modules see none of what follows. A stateful module receives
  `state_in` (dict name -> [B, ...]) and `episode_start` (bool [B]: the row's
  agent starts its episode at this step, so its `state_in` is the initial state)
  in `forward_inference`/`forward_exploration`, and returns `state_out` (same
  names and shapes). Runners keep one state per (env copy, agent): reset at the
  agent's episode start, carried over fragment cuts and turns of turn-based envs
  (it advances only when the agent acts), never shared between agents or env
  copies, saved with the runner's checkpoint state. Batches of stateful modules
  carry `state_in.<name>` and `episode_start` columns (`marl.data.sample_batch`).
  In `forward_train` a stateful module gets whole sequences laid end to end:
  `seq_lens` (int64 [S]) and `state_in` {name: [S, ...]} the state entering each
  sequence (chunks of at most `model.max_seq_len` steps of one agent's trajectory,
  `marl.learners.sequences`); it must return one output row per input row, as
  acting step by step would have (checked on the first update,
  `debugging.check_module_state`). `marl.modules.recurrent` has the pieces.
- Acting in NumPy (optional): `numpy_actor()` returns a `marl.modules.numpy_acting.NumpyActor`
  that computes the same exploration and greedy passes, distribution and draw included, from
  NumPy inputs; runners then act through it (no torch call per env step). None (the default):
  runners call the torch passes. Only stateless modules are asked.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from marl.modules.distributions import distribution_factory
from marl.modules.functional import MASKED_LOGIT
from marl.modules.popart import fit_state_saved_without_scales
from marl.modules.spaces import action_input_dim, flat_obs_dim

# What runners can pass to a module (`RLModule.inputs` names a subset); stateful modules get state_in/episode_start too.
MODULE_INPUTS = ("obs", "action_mask", "agent_index", "state")


class RLModule(nn.Module):
    """Base class. Subclasses build their layers in `__init__` and implement `forward_train`."""

    greedy_is_sampled = False  # True: greedy acting still samples the action distribution (a random baseline)
    inputs: tuple[str, ...] = ("obs", "action_mask")  # what runners pass to the forward passes (see MODULE_INPUTS)
    # True: image observations reach the module as [B, H, W, C] (or [B, C, H, W]) in the env's dtype (uint8 stays
    # uint8 through runners, batches and replay; scale it in the module), not flattened to float32 (the default).
    keeps_image_obs = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, model_config: dict | None = None):
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space
        self.model_config = dict(model_config or {})
        self.obs_dim = flat_obs_dim(observation_space)
        self.action_dim = action_input_dim(action_space)
        self.action_dist = distribution_factory(action_space)

    def forward_train(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def forward_exploration(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return self.forward_train(batch)

    def forward_inference(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return self.forward_train(batch)

    def get_initial_state(self) -> dict[str, torch.Tensor]:
        """One agent's state at its episode start (no batch axis); {}: the module is stateless."""
        return {}

    def numpy_actor(self):
        """A NumPy copy of the acting passes (`marl.modules.numpy_acting`), or None: runners act in torch."""
        return None

    def set_exploration_step(self, env_steps: int) -> None:
        """Called by runners before each fragment with the run's env steps so far (schedules like epsilon)."""

    @staticmethod
    def apply_action_mask(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = batch.get("action_mask")
        if mask is None:
            return logits
        return logits.masked_fill(mask < 0.5, MASKED_LOGIT)

    # -- weights as NumPy (what travels through Ray's object store) --------
    def get_state(self) -> dict[str, np.ndarray]:
        return network_state(self)

    def get_tensors(self) -> dict[str, torch.Tensor]:
        """The weights as copies on the module's device: what an in-process weight sync hands over (no host trip)."""
        return {k: v.detach().clone() for k, v in self.state_dict().items()}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        load_network_state(self, state)


def network_state(network: nn.Module) -> dict[str, np.ndarray]:
    """A network's weights as NumPy arrays (what travels through Ray's object store and checkpoints)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in network.state_dict().items()}


def as_host_arrays(state: dict) -> dict[str, np.ndarray]:
    """Weights as NumPy, whether given as tensors (an in-process sync's, on any device) or arrays: what Ray's object
    store and checkpoints hold."""
    return {k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


def _as_tensor(value) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))


def load_network_state(network: nn.Module, state: dict) -> None:
    """Loads weights given as NumPy arrays or as tensors on any device (load_state_dict copies onto the network's)."""
    # Arrays from Ray's object store are read-only; load_state_dict copies anyway, so copy-free is safe.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            network.load_state_dict({k: _as_tensor(v) for k, v in state.items()})
        except RuntimeError:
            fitted = fit_state_saved_without_scales(network, state)  # weights saved before PopArt's scale layers
            if fitted is None:
                raise
            network.load_state_dict({k: _as_tensor(v) for k, v in fitted.items()})


class MultiRLModule(nn.Module):
    """Policy id -> RLModule."""

    def __init__(self, modules: dict[str, RLModule]):
        super().__init__()
        self._modules_by_id = nn.ModuleDict(modules)

    def __getitem__(self, policy_id: str) -> RLModule:
        # What ModuleDict[policy_id] returns, read directly (runners ask once per policy per env step).
        return self._modules["_modules_by_id"]._modules[policy_id]

    def __contains__(self, policy_id: str) -> bool:
        return policy_id in self._modules_by_id

    def keys(self):
        return self._modules_by_id.keys()

    def items(self):
        return self._modules_by_id.items()

    def get_state(self, policy_ids=None) -> dict[str, dict[str, np.ndarray]]:
        ids = self.keys() if policy_ids is None else policy_ids
        return {pid: self._modules_by_id[pid].get_state() for pid in ids}

    def get_tensors(self, policy_ids=None) -> dict[str, dict[str, torch.Tensor]]:
        ids = self.keys() if policy_ids is None else policy_ids
        return {pid: self._modules_by_id[pid].get_tensors() for pid in ids}

    def set_state(self, state: dict[str, dict[str, np.ndarray]]) -> None:
        for pid, module_state in state.items():
            self._modules_by_id[pid].set_state(module_state)
