"""Preallocated per-policy row storage used while a runner samples.

Rows are written in blocks (all acting agents of one policy at one env step)
and turned into a `SampleBatch` once per fragment, regrouped so that each
agent's rows of one episode are contiguous and ordered by env step.

Which columns a batch holds, their shapes and dtypes, is the schema's (`marl.data.columns.columns_for`):
obs, actions, rewards, the end flags, the row's place (episode, agent, env copy,
step) and, for masked action spaces, the action mask; the others only when the
policy's algorithm asks for them (`config.plan_for(pid).columns`, names in
`REQUESTABLE`) or its module keeps state (`episode_start`, and the state entering
each training sequence: the `state_in.<name>` tables, one row per `max_seq_len`
chunk, `marl.data.chunks`).
"""

from __future__ import annotations

import numpy as np

from marl.data import sample_batch as sb
from marl.data.chunks import SequencePlan, chunk_start_index
from marl.data.columns import BUILT, ColumnSpec, row_specs


class PolicyCollector:
    def __init__(self, specs: dict[str, ColumnSpec], capacity: int, chunking: tuple[int, int] = (20, 0)):
        """`specs`: the policy's columns (`marl.data.columns.columns_for`: its obs and action layout, mask,
        requested columns, global state, stateful module); `chunking`: the (max_seq_len, burn_in) of a stateful
        module's chunks (`marl.modules.recurrent.sequence_chunking`)."""
        # Rows written per step: the row columns but those set when the batch is built, and the state entering
        # each row of a stateful module (held while the fragment is sampled; the built batch keeps it only where a
        # training sequence starts: what the learner and sequence replay read).
        self.spec = {name: (s.shape, s.dtype) for name, s in row_specs(specs).items() if name not in BUILT}
        self.state_columns = [name for name in specs if name.startswith(sb.STATE_IN + ".")]
        self.spec.update({name: (specs[name].shape, specs[name].dtype) for name in self.state_columns})
        self.track_next_obs = sb.NEXT_OBS in specs  # written at piece ends by the runner; the rest is filled in build()
        self.state_table = None
        if sb.STATE in specs:  # the global state at each row's env step (centralised critics): a table, one row
            state = specs[sb.STATE]  # per env copy and step, joined by index (not one copy per agent)
            self.state_table = np.zeros((16,) + state.shape, state.dtype)
            self.n_states = 0
        # The state reached after each row (`next_state.index`): the next row's state inside a piece (filled in
        # build()), the state the runner read at a piece end that is not a termination (appended to the same table).
        self.next_state_index = None
        self.max_seq_len, self.burn_in = (int(v) for v in chunking)
        self.n = 0
        self._alloc(max(capacity, 16))

    def _alloc(self, capacity: int) -> None:
        old = getattr(self, "cols", None)
        self.cols = {k: np.zeros((capacity,) + shape, dtype) for k, (shape, dtype) in self.spec.items()}
        if old is not None:  # grown mid-fragment: keep the rows so far (the rest is zeros already)
            for k, arr in old.items():
                self.cols[k][: self.n] = arr[: self.n]
        self.capacity = capacity
        # Hot columns bound once: the step loop writes them by index.
        self.rewards = self.cols[sb.REWARDS]
        self.terminateds = self.cols[sb.TERMINATEDS]
        self.truncateds = self.cols[sb.TRUNCATEDS]
        self.bootstrap_value = self.cols.get(sb.BOOTSTRAP_VALUE)
        self.vf_preds = self.cols.get(sb.VF_PREDS)
        self.next_obs = self.cols.get(sb.NEXT_OBS)
        self.next_action_mask = self.cols.get(sb.NEXT_ACTION_MASK)
        self.next_state_index = self.cols.get(sb.table_index(sb.NEXT_STATE))

    def end_without_next(self, rows) -> None:
        """Rows whose piece ends with no observation reached: they bootstrap from their own value,
        and their own obs and mask stand in for the next ones."""
        if self.bootstrap_value is not None:
            self.bootstrap_value[rows] = self.vf_preds[rows]
        if self.next_obs is not None:
            self.next_obs[rows] = self.cols[sb.OBS][rows]
        if self.next_action_mask is not None:
            self.next_action_mask[rows] = self.cols[sb.ACTION_MASK][rows]
        if self.next_state_index is not None:
            self.next_state_index[rows] = self.cols[sb.table_index(sb.STATE)][rows]

    def set_next_states(self, rows, states: np.ndarray) -> None:
        """The global states reached at the ends of the pieces of `rows` (truncations, fragment cuts)."""
        if self.next_state_index is not None and len(rows):
            # Read by the runner's global-state reader, like the states at each step: already its dtype (uint8 frames or float32).
            self.next_state_index[rows] = self._add_states(np.stack(states)) + np.arange(len(rows))

    def add_block(self, obs, actions, mask, eps_id, agent_index, env_index, t, extra: dict) -> int:
        """Writes m rows; returns the index of the first. `extra` holds the requested columns' values
        (column name -> m values). Rewards and flags start at zero (see build)."""
        m = len(obs)
        start, end = self.n, self.n + m
        if end > self.capacity:
            self._alloc(max(end, 2 * self.capacity))
        c = self.cols
        c[sb.OBS][start:end] = obs
        c[sb.ACTIONS][start:end] = actions.reshape((m,) + self.spec[sb.ACTIONS][0])
        if mask is not None:
            c[sb.ACTION_MASK][start:end] = mask
        for name, values in extra.items():
            if name == sb.STATE:  # (states of the block's env copies, each row's env copy among them)
                states, inverse = values
                c[sb.table_index(sb.STATE)][start:end] = self._add_states(states) + inverse
                continue
            c[name][start:end] = values
        c[sb.EPS_ID][start:end] = eps_id
        c[sb.AGENT_INDEX][start:end] = agent_index
        c[sb.ENV_INDEX][start:end] = env_index
        c[sb.T][start:end] = t
        self.n = end
        return start

    def _add_states(self, states: np.ndarray) -> int:
        """Appends global states to the table; returns the index of the first."""
        start, end = self.n_states, self.n_states + len(states)
        if states.dtype != self.state_table.dtype:  # uint8 frames stay uint8 (`marl.runners.global_state`)
            self.state_table = self.state_table.astype(states.dtype)
        if end > len(self.state_table):
            grown = np.zeros((max(end, 2 * len(self.state_table)), self.state_table.shape[1]), self.state_table.dtype)
            grown[:start] = self.state_table[:start]
            self.state_table = grown
        self.state_table[start:end] = states
        self.n_states = end
        return start

    def build(self) -> sb.SampleBatch:
        """The rows so far, grouped by (episode, agent) and ordered by step; resets the collector."""
        n = self.n
        cols = self.cols
        order = np.lexsort((cols[sb.T][:n], cols[sb.AGENT_INDEX][:n], cols[sb.EPS_ID][:n]))
        tables = {}
        if self.state_table is not None:
            tables[sb.STATE] = self.state_table[: self.n_states].copy()
            if self.next_state_index is not None:
                tables[sb.NEXT_STATE] = tables[sb.STATE]  # one table, two views
            self.n_states = 0
        skip = self.state_columns
        batch = sb.SampleBatch({k: v[:n][order] for k, v in cols.items() if k not in skip}, tables)
        eps, agent = batch[sb.EPS_ID], batch[sb.AGENT_INDEX]
        end = np.ones(n, dtype=np.bool_)
        if n > 1:
            end[:-1] = (eps[1:] != eps[:-1]) | (agent[1:] != agent[:-1])
        batch[sb.SEGMENT_END] = end | batch[sb.TERMINATEDS] | batch[sb.TRUNCATEDS]
        if skip:  # the learner's chunks of this fragment (pieces never span fragments): their starting states
            kept = SequencePlan(batch[sb.SEGMENT_END], self.max_seq_len).stored_rows(self.burn_in)
            batch[sb.STATE_IN_INDEX] = chunk_start_index(n, kept)
            at_starts = order[kept]
            for name in skip:
                batch.tables[name] = cols[name][at_starts]
        if self.track_next_obs and n > 1:
            inside = ~batch[sb.SEGMENT_END][:-1]
            batch[sb.NEXT_OBS][:-1][inside] = batch[sb.OBS][1:][inside]
            if self.next_action_mask is not None:
                batch[sb.NEXT_ACTION_MASK][:-1][inside] = batch[sb.ACTION_MASK][1:][inside]
            if self.next_state_index is not None:
                index = sb.table_index(sb.NEXT_STATE)
                batch[index][:-1][inside] = batch[sb.table_index(sb.STATE)][1:][inside]
        # The accumulating columns start the next fragment at zero (one write here, not one per step).
        written_at_ends = tuple(k for k in (sb.BOOTSTRAP_VALUE, sb.NEXT_OBS, sb.NEXT_ACTION_MASK, sb.table_index(sb.NEXT_STATE)) if k in cols)
        for name in (sb.REWARDS, sb.TERMINATEDS, sb.TRUNCATEDS) + written_at_ends:
            cols[name][:n] = 0
        self.n = 0
        return batch
