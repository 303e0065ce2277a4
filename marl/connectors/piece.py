"""The connector piece: one step of a pipeline, and the per-row context env->module pieces read.

Three pipelines, each an ordered list of pieces (`marl.connectors.build` assembles them
from the `connectors` config section):

    env->module  per policy, every env step, over that policy's acting rows (all env copies):
                 piece(obs: float32 [m, d], ctx: RowContext) -> float32 [m, d']
                 (the pipeline always starts by flattening the raw observations; see `Flatten`)
    module->env  piece(actions: the module's actions [m, ...], ctx: RowContext) -> actions [m, ...]
                 (the pipeline always ends by turning them into per-agent env actions)
    learner      per policy, each training batch, before the algorithm's own pieces (GAE):
                 piece(batch: SampleBatch, ctx: LearnerContext) -> SampleBatch

A piece subclasses `ConnectorPiece` and overrides what it needs; every default does nothing:

    transform_space(space, action_space) -> space
        env->module: the observation space after this piece (the module is built from the
        last piece's space). Called once when the pipeline is built, before any data: size
        state here. module->env pieces receive the action space and return it unchanged.
    needs: frozenset of RowContext fields the pipeline computes for this piece (only then):
        "episode_start", "prev_action", "prev_reward".
    get_state() / set_state(state): everything needed to resume exactly, as a tree of arrays
        and plain values; saved in runner and learner checkpoints.
    synced = True, with pop_delta() / merge_delta(delta) / get_central() / set_central(c):
        statistics learnt on runners (MeanStd): each runner ships `pop_delta()` with its batch,
        the learner's copy of the piece merges every delta into its central statistics, which
        go back to every runner with the weights (`set_central`).

A piece's public attributes are its settings (`{name: ..., **settings}` in a scenario, and what
`to_dict` writes back); keep state in _private attributes. Pieces must not modify their input
in place (the sampled batch keeps the arrays the pipeline started from).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

CONTEXT_FIELDS = frozenset({"episode_start", "prev_action", "prev_reward"})


class ConnectorPiece:
    needs: frozenset = frozenset()
    synced = False

    def __call__(self, data, ctx):
        raise NotImplementedError

    def transform_space(self, space, action_space):
        return space

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict) -> None:
        pass

    # -- statistics synced runners -> learner -> runners (only when `synced`) --------------
    def pop_delta(self):
        raise NotImplementedError

    def merge_delta(self, delta) -> None:
        raise NotImplementedError

    def get_central(self):
        raise NotImplementedError

    def set_central(self, central) -> None:
        raise NotImplementedError

    def settings(self) -> dict:
        """What rebuilds this piece: its public attributes (the constructor's keyword arguments)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.settings().items())})"


class RowContext:
    """Who the rows of one env->module / module->env call are.

    `env_index`, `agent_index`, `episode_id` (and `slots`: one per (env copy, agent)) are
    converted from the runner's lists on first use. `episode_start`, `prev_action` and
    `prev_reward` are filled by the pipeline before its pieces run, and only when a piece
    `needs` them. `update_stats`: the rows are training samples (filters learn from them).
    `peek`: a bootstrap pass over observations reached after the rows' actions (V(s')):
    pieces compute their output but change no state; it then brings `prev_action` and
    `prev_reward` (the rows' own action and reward) with it.
    """

    def __init__(self, env_index, agent_index, episode_id, num_agents: int, num_slots: int, *,
                 update_stats: bool, peek: bool = False, returns=None, prev_action=None, prev_reward=None):
        self._env_index, self._agent_index, self._episode_id = env_index, agent_index, episode_id
        self.num_agents, self.num_slots = num_agents, num_slots
        self.update_stats, self.peek = update_stats, peek
        self._returns = returns  # () -> each row's agent return so far in its episode (acting rows)
        self.action_mask = None
        self.episode_start: np.ndarray | None = None
        self.prev_action, self.prev_reward = prev_action, prev_reward

    def __len__(self) -> int:
        return len(self._env_index)

    @cached_property
    def env_index(self) -> np.ndarray:
        return np.asarray(self._env_index, np.int64)

    @cached_property
    def agent_index(self) -> np.ndarray:
        return np.asarray(self._agent_index, np.int64)

    @cached_property
    def episode_id(self) -> np.ndarray:
        return np.asarray(self._episode_id, np.int64)

    @cached_property
    def slots(self) -> np.ndarray:
        """One index per (env copy, agent) in [0, num_slots): where per-agent state lives."""
        return self.env_index * self.num_agents + self.agent_index

    @cached_property
    def agent_return(self) -> np.ndarray:
        return np.asarray(self._returns(), np.float64)


class LearnerContext:
    """What a learner piece may ask about its batch."""

    def __init__(self, policy_id: str):
        self.policy_id = policy_id
