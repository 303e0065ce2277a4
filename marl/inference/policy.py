"""A trained policy acting outside a run: the path runners take, for one caller's observations.

    policy = marl.load_policy("runs/spread/checkpoint", "default_policy")
    action = policy.compute_single_action(obs)                       # greedy; explore=True samples
    actions = policy.compute_actions({"agent_0": o0, "agent_1": o1})  # several agents, or episodes, at once

Each call runs the policy's env->module connectors (with the run's statistics: a mean/std filter
normalises as it did at the end of training, and learns nothing more), the module
(`forward_inference`, or `forward_exploration` with `explore=True`), the action distribution
(its mode, or a sample from the policy's seeded generator) and the module->env connectors (clipping,
unsquashing to the action space's bounds), and returns actions as the env takes them.

State is kept per key of the observation dict (an agent id, or any hashable such as
`(episode_id, agent_id)`): a recurrent module's `state_out` becomes that key's next `state_in`,
and connector pieces with memory (frame stacks, previous actions) keep theirs. A key's first call
starts its episode; `reset(keys)` (or `new_episode=True`) starts a new one. Previous-reward inputs
read 0: rewards do not reach a deployed policy.

`Policy.act` is the same pass returning what training needs too (the module's actions, their
log-probabilities, value estimates): `marl serve`'s clients act through it (`inference="local"`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from marl.connectors.module_to_env import ActionAdapter
from marl.errors import ConfigError
from marl.runners.module_inputs import AgentStates, ModuleInputs
from marl.connectors.piece import RowContext


@dataclass
class Acted:
    """One call's rows: `actions` as the env takes them, `module_actions` as the module sampled them,
    `logp` their log-probabilities, `vf` the value estimates (None unless the pass made them)."""

    actions: list
    module_actions: np.ndarray
    logp: np.ndarray
    vf: np.ndarray | None


class FlatObservations:
    """The connectors of a policy whose clients send flat float observations (`marl serve`, which refuses
    env->module connectors): observations stacked as float32, actions converted by the action space alone."""

    masked = False

    def __init__(self, action_space: gym.Space):
        self._to_env = ActionAdapter(action_space)

    def env_to_module(self, raw_obs: list, ctx):
        return np.stack([np.asarray(o, np.float32).reshape(-1) for o in raw_obs]), None

    def to_module(self, raw_obs: list, ctx):
        return self.env_to_module(raw_obs, ctx)

    def to_env(self, actions: np.ndarray, ctx) -> list:
        return self._to_env(actions)


class Policy:
    """`module` (an RLModule with its weights), `connectors` (its `PolicyConnectors` with the run's statistics,
    or None for flat float observations), `agents` (the env's possible agents, in order: the `agent_index`
    input of modules that read it), `seed` (of the generator exploration samples from; or pass that
    `generator`, shared by several policies), `max_keys` (keys acting at once; `reset` frees them)."""

    def __init__(self, module, connectors=None, *, policy_id: str = "default_policy", agents: list[str] | None = None,
                 seed: int | None = None, generator: torch.Generator | None = None, max_keys: int = 1024):
        self.module, self.policy_id = module.eval(), policy_id
        self.connectors = connectors if connectors is not None else FlatObservations(module.action_space)
        self.inputs = ModuleInputs(module, self.connectors, policy_id)
        self.agent_index = {agent: i for i, agent in enumerate(agents or [])}
        self.max_keys = int(max_keys)
        if generator is None:
            generator = torch.Generator()
            if seed is None:
                generator.seed()  # (its own entropy; torch's global generator is left alone)
            else:
                generator.manual_seed(int(seed))
        self.generator = generator
        self._states = AgentStates(self.inputs.initial_state, self.max_keys, policy_id) if self.inputs.stateful else None
        self._slot: dict[Hashable, int] = {}  # key -> its connector and state slot
        self._free = list(range(self.max_keys - 1, -1, -1))  # slots no key holds (popped from the end: 0 first)
        self._episode = np.zeros(self.max_keys, np.int64)  # each slot's episode id (a new one: a new episode)

    # -- the verbs --------------------------------------------------------------------------------
    def compute_single_action(self, obs, *, explore: bool = False, key: Hashable = "agent_0", global_state=None):
        """One observation's action (an int for Discrete spaces, an array for Box); `key` names whose
        step it is (its recurrent and connector state), `global_state` the env's state for modules that read one."""
        return self.compute_actions({key: obs}, explore=explore, global_state=global_state)[key]

    def compute_actions(self, obs: Mapping, *, explore: bool = False, new_episode: bool = False, global_state=None) -> dict:
        """{key: action} for {key: observation}; `new_episode` first resets those keys' state."""
        keys = list(obs)
        if new_episode:
            self.reset(keys)
        acted = self.act([obs[k] for k in keys], keys, explore=explore, global_state=global_state)
        return dict(zip(keys, acted.actions))

    def act(self, raw_obs: list, keys: list, *, explore: bool, global_state=None) -> Acted:
        """The pass over a block of rows (row i is key i's step)."""
        if len(set(keys)) != len(keys):  # (two rows of one slot: its state could advance only once)
            raise ValueError(f"policy '{self.policy_id}': a key acts at most once per call, got {keys}")
        slots = [self._slot_of(k) for k in keys]
        n = len(slots)
        ctx = RowContext(slots, [0] * n, self._episode[slots], 1, self.max_keys, update_stats=False,
                         returns=lambda: np.zeros(n))
        agent_index = [self.agent_index.get(k if isinstance(k, str) else k[-1], 0) for k in keys] \
            if self.inputs.wants_agent_index else None
        if self.inputs.wants_state and global_state is None:
            raise ConfigError(f"policy '{self.policy_id}': its module reads the env's global state; pass global_state=")
        state_in = episode_start = None
        if self._states is not None:
            state_in, episode_start = self._states.gather(slots, [0] * n)
        inputs, _, _ = self.inputs(raw_obs, ctx, agent_index, _rows(global_state, n), state_in, episode_start)
        module = self.module
        with torch.inference_mode():
            out = module.forward_exploration(inputs) if explore else module.forward_inference(inputs)
            dist = module.action_dist(out["action_dist_inputs"])
            sampled = explore or module.greedy_is_sampled
            action = dist.sample(self.generator) if sampled else dist.deterministic_sample()
            logp = dist.logp(action).numpy()
        if self._states is not None:
            self._states.scatter(slots, [0] * n, out.get("state_out"))
        module_actions = action.numpy()
        vf = out.get("vf_preds")
        return Acted(self.connectors.to_env(module_actions, ctx), module_actions, logp, None if vf is None else vf.numpy())

    def reset(self, keys=None) -> None:
        """Starts new episodes for `keys` (all when None): their next step gets the initial state; their slots
        are freed for other keys."""
        for key in list(self._slot) if keys is None else keys:
            slot = self._slot.pop(key, None)
            if slot is not None:
                self._free.append(slot)
                self._episode[slot] += 1
                if self._states is not None:
                    self._states.reset(slot)

    def _slot_of(self, key: Hashable) -> int:
        slot = self._slot.get(key)
        if slot is None:
            if len(self._slot) >= self.max_keys:
                raise ValueError(f"policy '{self.policy_id}': more than {self.max_keys} keys are acting; reset(keys) "
                                 "frees ended ones (or build the policy with a larger max_keys)")
            slot = self._slot[key] = self._free.pop()
        return slot

    def set_weights(self, weights: dict, connector_state: dict | None = None) -> None:
        """New weights ({name: array}) and, for the connectors, the learner's central statistics."""
        self.module.set_state(weights)
        if connector_state is not None and hasattr(self.connectors, "set_central"):
            self.connectors.set_central(connector_state)


def _rows(global_state, n: int):
    if global_state is None:
        return None
    state = np.asarray(global_state, np.float32)
    return np.broadcast_to(state, (n,) + state.shape[-1:]) if state.ndim == 1 else state
