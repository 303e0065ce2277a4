"""A batched runner's fragment: preallocated tensors [steps, worlds, agents, ...], built into SampleBatches.

`WorldColumns` holds what every agent of a world shares at a step (end flags, episode id, step
index, global state); `PolicyFragment` one policy's rows (its agents' observations, actions,
rewards and the columns its algorithm asks for). The runner writes step t of every tensor with
whole-tensor ops. `PolicyFragment.build` lays the rows out as the dict-API runner's batches are:
each agent's rows of one world contiguous and ordered by step (so every trajectory piece is
contiguous), `segment_end` on the last row of every piece (a termination, a truncation, or the
fragment's cut), `bootstrap_value` = V(s') where a piece ends without termination, and `next_obs`
/ the `next_state` table index = what the step reached (the final observation where a world
ended, the observation the next fragment starts from at the cut). The SampleBatches hold torch tensors on the
runner's device (the learner takes them as they are: no host round trip); each is memory of its own, since the
fragment's tensors are overwritten by the next fragment.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.data import sample_batch as sb
from marl.data.columns import COLUMNS, ColumnSpec


def torch_dtype(dtype) -> torch.dtype:
    """The torch dtype of a NumPy dtype (the column schema's are NumPy's)."""
    return torch.from_numpy(np.zeros(0, dtype)).dtype


def _own(x: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """`x` in memory of its own (a copy where it is a view of `source`): the fragment's tensors are overwritten by
    the next fragment."""
    if x.untyped_storage().data_ptr() == source.untyped_storage().data_ptr():
        x = x.clone()
    return x


def _rows(x: torch.Tensor) -> torch.Tensor:
    """[T, W, A, ...] -> rows ordered (world, agent, step)."""
    t, w, a = x.shape[:3]
    return _own(x.permute(1, 2, 0, *range(3, x.dim())).reshape(w * a * t, *x.shape[3:]), x)


class WorldColumns:
    """Per (step, world): flags, episode ids, episode steps and (if asked) the global state."""

    def __init__(self, steps: int, worlds: int, device, state_dim: int | None, next_state: bool):
        self.steps, self.worlds = steps, worlds

        def zeros(name: str, shape: tuple = ()) -> torch.Tensor:  # dtypes: the column schema's
            dtype = COLUMNS[name].dtype
            return torch.zeros((steps, worlds) + shape, dtype=torch.float32 if dtype is None else torch_dtype(dtype), device=device)

        self.terminated, self.truncated = zeros(sb.TERMINATEDS), zeros(sb.TRUNCATEDS)
        self.eps_id, self.t = zeros(sb.EPS_ID), zeros(sb.T)
        self.state = None if state_dim is None else zeros(sb.STATE, (state_dim,))
        # next_state: the state reached at each step where a world ended (written then); the rest is derived.
        self.next_state = zeros(sb.NEXT_STATE, (state_dim,)) if next_state else None

    def state_table(self, cut_state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(table, each (step, world)'s index of its state, of the state it reached or None)."""
        n = self.steps * self.worlds
        here = torch.arange(n, device=self.t.device).view(self.steps, self.worlds)
        if self.next_state is None:
            return _own(self.state.reshape(n, -1), self.state), here, None
        # Table: the states at each step, then the states reached where worlds ended, then the cut's.
        table = torch.cat([self.state.reshape(n, -1), self.next_state.reshape(n, -1), cut_state], dim=0)
        reached = torch.empty_like(here)
        reached[:-1] = here[1:]
        reached[-1] = 2 * n + torch.arange(self.worlds, device=here.device)
        ended = self.terminated | self.truncated
        reached[ended] = n + here[ended]
        return table, here, reached  # (a new tensor: torch.cat copies)

    @property
    def ended(self) -> torch.Tensor:
        return self.terminated | self.truncated


class PolicyFragment:
    """One policy's rows: agents `agent_index` (positions in the env's agent list) of every world."""

    def __init__(self, steps: int, worlds: int, agent_index: list[int], specs: dict[str, ColumnSpec], device):
        """`specs`: the policy's columns (`marl.data.columns.columns_for`), read once here: which tensors exist,
        their shapes per row and dtypes."""
        a = len(agent_index)
        self.shape = (steps, worlds, a)
        self.columns = specs

        def zeros(name: str) -> torch.Tensor | None:
            spec = specs.get(name)
            return None if spec is None else torch.zeros(self.shape + spec.shape, dtype=torch_dtype(spec.dtype), device=device)

        self.agent_index = torch.tensor(agent_index, dtype=torch_dtype(specs[sb.AGENT_INDEX].dtype), device=device)
        self.env_index = torch.arange(worlds, dtype=torch_dtype(specs[sb.ENV_INDEX].dtype), device=device)
        self.obs, self.actions, self.rewards = zeros(sb.OBS), zeros(sb.ACTIONS), zeros(sb.REWARDS)
        self.mask = zeros(sb.ACTION_MASK)
        self.logp, self.vf, self.bootstrap = zeros(sb.ACTION_LOGP), zeros(sb.VF_PREDS), zeros(sb.BOOTSTRAP_VALUE)
        # next_obs: written where a world ended (its final observation); the rest is derived in build().
        self.next_obs, self.next_mask = zeros(sb.NEXT_OBS), zeros(sb.NEXT_ACTION_MASK)

    def build(self, world: WorldColumns, cut_obs: torch.Tensor, cut_mask: torch.Tensor | None,
              state_table: tuple | None) -> sb.SampleBatch:
        """The fragment's rows as a SampleBatch. `cut_obs`/`cut_mask`: [W, A, ...] what the agents act on next."""
        steps, worlds, agents = self.shape
        ended = world.ended
        expand = lambda x: x.unsqueeze(-1).expand(self.shape)  # noqa: E731  [T, W] -> [T, W, A]
        last = torch.zeros((steps, worlds), dtype=torch.bool, device=ended.device)
        last[-1] = True
        cols = {
            sb.OBS: _rows(self.obs),
            sb.ACTIONS: _rows(self.actions),
            sb.REWARDS: _rows(self.rewards),
            sb.TERMINATEDS: _rows(expand(world.terminated)),
            sb.TRUNCATEDS: _rows(expand(world.truncated)),
            sb.EPS_ID: _rows(expand(world.eps_id)),
            sb.AGENT_INDEX: _rows(self.agent_index.view(1, 1, agents).expand(self.shape)),
            sb.ENV_INDEX: _rows(self.env_index.view(1, worlds, 1).expand(self.shape)),
            sb.T: _rows(expand(world.t)),
            sb.SEGMENT_END: _rows(expand(ended | last)),
        }
        if self.mask is not None:
            cols[sb.ACTION_MASK] = _rows(self.mask)
        if self.logp is not None:
            cols[sb.ACTION_LOGP] = _rows(self.logp)
        if self.vf is not None:
            cols[sb.VF_PREDS] = _rows(self.vf)
        if self.bootstrap is not None:
            cols[sb.BOOTSTRAP_VALUE] = _rows(self.bootstrap)
        if self.next_obs is not None:
            cols[sb.NEXT_OBS] = _rows(self._reached(self.next_obs, self.obs, cut_obs, ended))
            if self.next_mask is not None:
                cols[sb.NEXT_ACTION_MASK] = _rows(self._reached(self.next_mask, self.mask, cut_mask, ended))
        tables = {}
        if state_table is not None:
            table, here, reached = state_table
            tables[sb.STATE] = table
            cols[sb.table_index(sb.STATE)] = _rows(expand(here))
            if reached is not None and sb.NEXT_STATE in self.columns:
                tables[sb.NEXT_STATE] = table  # one table, two views (as the dict-API runner's)
                cols[sb.table_index(sb.NEXT_STATE)] = _rows(expand(reached))
        return sb.SampleBatch(cols, tables)

    def _reached(self, at_ends: torch.Tensor, here: torch.Tensor, cut: torch.Tensor, ended: torch.Tensor) -> torch.Tensor:
        """What each row's step reached: the next row's value inside a piece, `at_ends` where its world ended,
        `cut` at the fragment's last step."""
        out = torch.empty_like(here)
        out[:-1] = here[1:]
        out[-1] = cut
        return torch.where(ended.view(*ended.shape, *([1] * (here.dim() - 2))), at_ends, out)
