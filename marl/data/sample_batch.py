"""Columns of rows: the one currency between runners, buffers and learners.

A `SampleBatch` is a flat table: every column has the same length along axis 0. A column is
a NumPy array (rows built in Python: the dict path, replay, offline data) or a torch tensor
(rows cut from a batched runner's fragment, on its device, so they reach the learner with no
host round trip); the row operations here and the learner connectors take either
(`marl.data.array_ops`), and `to_numpy()` is the edge where rows leave for NumPy's world
(replay buffers, offline files, checkpoints).
Beside its columns it may hold *tables*: arrays shared by many rows, joined by an
index column (`table_index(name)`); MAPPO's global state is one row per env step
in table `state`, not one copy per agent row, and a stateful module's state is
kept only where its training sequences start (tables `state_in.<name>`, index -1
on the other rows: `marl.data.chunks`). Row operations keep the tables and
their index columns valid; `join(name)` materialises a table's value per row.
A `MultiAgentBatch` maps policy id -> `SampleBatch` and counts env steps and
agent steps separately (one env step of simple_spread is three agent steps).
"""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

from marl.data import array_ops as ops
from marl.data.array_ops import Column

# Column names shared by runners, connectors and losses.
OBS = "obs"
ACTIONS = "actions"
REWARDS = "rewards"
TERMINATEDS = "terminateds"
TRUNCATEDS = "truncateds"
ACTION_LOGP = "action_logp"
ACTION_DIST_INPUTS = "action_dist_inputs"
VF_PREDS = "vf_preds"
ACTION_MASK = "action_mask"
EPS_ID = "eps_id"  # unique episode id (int64)
AGENT_INDEX = "agent_index"  # index of the agent in env.possible_agents
ENV_INDEX = "env_index"  # which env copy of the runner
T = "t"  # env step index inside the episode at which the agent acted
SEGMENT_END = "segment_end"  # last row of an agent's trajectory piece in this batch
BOOTSTRAP_VALUE = "bootstrap_value"  # V(s') at a segment end that is not a termination
STATE = "state"  # global state at the env step the agent acted (centralised critics, MAPPO); a table
NEXT_STATE = "next_state"  # global state after the action (centralised Q critics, MASAC/MADDPG); a view of table `state`
NEXT_OBS = "next_obs"  # observation after the action (DQN family); at a piece end: the state reached
NEXT_ACTION_MASK = "next_action_mask"  # legal actions at next_obs (masked envs, DQN family); zeros after a termination
EPISODE_START = "episode_start"  # the row's agent starts its episode here (stateful modules: state_in is the initial state)
STATE_IN = "state_in"  # prefix: table `state_in.<name>`: a stateful module's state entering each chunk's first step
STATE_IN_INDEX = "state_in.index"  # each row's place in the state_in tables; -1: the row starts no chunk (`marl.data.chunks`)
ADVANTAGES = "advantages"
VALUE_TARGETS = "value_targets"
WEIGHTS_VERSION = "weights_version"


def table_index(name: str) -> str:
    """The column of each row's place in table `name` (a stateful module's state tables share `state_in.index`)."""
    if name.startswith(STATE_IN + "."):
        return STATE_IN_INDEX
    return f"{name}.index"


def state_in_column(name: str) -> str:
    """The table (or, in a batch built by hand, the per-row column) of a stateful module's state `name`."""
    return f"{STATE_IN}.{name}"


class SampleBatch:
    """Named columns of equal length (NumPy arrays or torch tensors)."""

    __slots__ = ("columns", "tables")

    def __init__(self, columns: Mapping[str, Column] | None = None, tables: Mapping[str, Column] | None = None):
        self.columns: dict[str, Column] = {}
        self.tables: dict[str, Column] = dict(tables or {})  # name -> rows shared through column table_index(name)
        lengths = set()
        for name, value in (columns or {}).items():
            arr = value if ops.is_tensor(value) else np.asarray(value)
            if arr.ndim == 0:
                raise ValueError(f"SampleBatch column '{name}' is a scalar; columns need a leading batch axis")
            self.columns[name] = arr
            lengths.add(len(arr))
        if len(lengths) > 1:
            sizes = {k: len(v) for k, v in self.columns.items()}
            raise ValueError(f"SampleBatch columns have different lengths: {sizes}")

    # -- mapping-like access -------------------------------------------------
    def __len__(self) -> int:
        for value in self.columns.values():
            return len(value)
        return 0

    def __getitem__(self, name: str) -> Column:
        if name not in self.columns and name in self.tables:
            return self.join(name)  # a reader that wants the rows; hot paths keep the table (see Learner)
        return self.columns[name]

    def __setitem__(self, name: str, value: Column) -> None:
        value = value if ops.is_tensor(value) else np.asarray(value)
        if self.columns and len(value) != len(self):
            raise ValueError(f"column '{name}' has length {len(value)}, batch has {len(self)}")
        self.columns[name] = value

    def __contains__(self, name: str) -> bool:
        return name in self.columns or name in self.tables

    def keys(self):
        return self.columns.keys()

    def items(self):
        return self.columns.items()

    def get(self, name: str, default=None):
        return self.columns.get(name, default)

    def copy(self) -> "SampleBatch":
        return SampleBatch({k: ops.copy(v) for k, v in self.columns.items()}, {k: ops.copy(t) for k, t in self.tables.items()})

    def to_numpy(self) -> "SampleBatch":
        """The batch with NumPy columns and tables (NumPy ones are kept as they are, not copied)."""
        return SampleBatch({k: ops.to_numpy(v) for k, v in self.columns.items()},
                           {k: ops.to_numpy(t) for k, t in self.tables.items()})

    def join(self, name: str) -> Column:
        """Table `name`'s value for every row (a column; the table stays shared)."""
        index = self.columns[table_index(name)]
        if name.startswith(STATE_IN + ".") and len(index) and index.min() < 0:
            raise ValueError(f"table '{name}' holds rows only where sequences start; read it with marl.data.chunks.states_at")
        return self.tables[name][index]

    # -- row operations ------------------------------------------------------
    def slice(self, start: int, end: int) -> "SampleBatch":
        return SampleBatch({k: v[start:end] for k, v in self.columns.items()}, self.tables)

    def take(self, indices: np.ndarray) -> "SampleBatch":
        return SampleBatch({k: v[indices] for k, v in self.columns.items()}, self.tables)

    def shuffle(self, rng: np.random.Generator | None = None) -> "SampleBatch":
        """A row-permuted copy (the columns stay aligned)."""
        rng = rng if rng is not None else np.random.default_rng()
        return self.take(rng.permutation(len(self)))

    def minibatches(
        self, size: int, rng: np.random.Generator | None = None, drop_last: bool = False
    ) -> Iterator["SampleBatch"]:
        """Yields minibatches of `size` rows, shuffled when `rng` is given."""
        if size <= 0:
            raise ValueError(f"minibatch size must be positive, got {size}")
        n = len(self)
        order = rng.permutation(n) if rng is not None else np.arange(n)
        stop = n - (n % size) if drop_last else n
        for start in range(0, stop, size):
            yield self.take(order[start : start + size])

    @staticmethod
    def concat(batches: list["SampleBatch"]) -> "SampleBatch":
        batches = [b for b in batches if len(b) > 0]
        if not batches:
            return SampleBatch()
        if len(batches) == 1:
            return batches[0]
        names = list(batches[0].columns)
        for b in batches[1:]:
            if set(b.columns) != set(names) or set(b.tables) != set(batches[0].tables):
                raise ValueError(
                    f"cannot concat SampleBatches with different columns: {sorted(names)} + tables {sorted(batches[0].tables)} "
                    f"vs {sorted(b.columns)} + tables {sorted(b.tables)}"
                )
        columns = {k: ops.concatenate([b.columns[k] for b in batches]) for k in names}
        tables = {}
        for name in batches[0].tables:  # each batch's indices move past the tables before it (-1: no row, stays)
            offsets = np.cumsum([0] + [len(b.tables[name]) for b in batches[:-1]]).tolist()
            index = table_index(name)
            columns[index] = ops.int64(ops.concatenate(
                [ops.where(b.columns[index] >= 0, b.columns[index] + off, -1) if off else b.columns[index]
                 for b, off in zip(batches, offsets)]))
            tables[name] = ops.concatenate([b.tables[name] for b in batches])
        return SampleBatch(columns, tables)

    # -- inspection ----------------------------------------------------------
    def summary(self) -> str:
        """One line per column: dtype, shape, min, max, mean (as RLlib users know it)."""
        lines = []
        for name in sorted(self.columns):
            arr = ops.to_numpy(self.columns[name])  # (inspection: a tensor's values are read on the host)
            if arr.dtype.kind in "biuf" and arr.size:
                stats = f"min={arr.min():.4g}, max={arr.max():.4g}, mean={arr.astype(np.float64).mean():.4g}"
            elif arr.size:
                stats = f"head={arr.flat[0]!r}"
            else:
                stats = "empty"
            kind = "torch.Tensor" if ops.is_tensor(self.columns[name]) else "np.ndarray"
            lines.append(f"  {name!r}: {kind}({arr.shape}, dtype={arr.dtype}, {stats})")
        return "{\n" + ",\n".join(lines) + "\n}"

    def size_bytes(self) -> int:
        return sum(ops.nbytes(v) for v in self.columns.values()) + sum(ops.nbytes(t) for t in self.tables.values())

    def __repr__(self) -> str:
        tables = f"; tables: {', '.join(f'{k} ({len(t)} rows)' for k, t in self.tables.items())}" if self.tables else ""
        return f"SampleBatch({len(self)} rows: {', '.join(self.columns)}{tables})"


class MultiAgentBatch:
    """Policy id -> SampleBatch, with env steps counted apart from agent steps.

    A batch with one policy stays a MultiAgentBatch: code downstream never has
    to ask which of the two shapes it got.
    """

    __slots__ = ("policy_batches", "env_steps")

    def __init__(self, policy_batches: dict[str, SampleBatch], env_steps: int):
        # Only rows: where they came from travels beside them, in a workflow record (`marl.data.records`).
        self.policy_batches = dict(policy_batches)
        self.env_steps = int(env_steps)

    def agent_steps(self) -> int:
        return sum(len(b) for b in self.policy_batches.values())

    def agent_steps_per_policy(self) -> dict[str, int]:
        return {pid: len(b) for pid, b in self.policy_batches.items()}

    def __getitem__(self, policy_id: str) -> SampleBatch:
        return self.policy_batches[policy_id]

    def __contains__(self, policy_id: str) -> bool:
        return policy_id in self.policy_batches

    def size_bytes(self) -> int:
        return sum(b.size_bytes() for b in self.policy_batches.values())

    def to_numpy(self) -> "MultiAgentBatch":
        """Every policy's rows with NumPy columns (`SampleBatch.to_numpy`)."""
        return MultiAgentBatch({pid: b.to_numpy() for pid, b in self.policy_batches.items()}, self.env_steps)

    @staticmethod
    def concat(batches: list["MultiAgentBatch"]) -> "MultiAgentBatch":
        policy_ids: list[str] = []
        for b in batches:
            policy_ids.extend(p for p in b.policy_batches if p not in policy_ids)
        merged = {
            pid: SampleBatch.concat([b.policy_batches[pid] for b in batches if pid in b.policy_batches])
            for pid in policy_ids
        }
        return MultiAgentBatch(merged, sum(b.env_steps for b in batches))

    def summary(self) -> str:
        parts = [f"MultiAgentBatch(env_steps={self.env_steps}, agent_steps={self.agent_steps()})"]
        for pid, b in self.policy_batches.items():
            parts.append(f"policy {pid!r}: {b.summary()}")
        return "\n".join(parts)

    def __repr__(self) -> str:
        per = ", ".join(f"{p}: {len(b)}" for p, b in self.policy_batches.items())
        return f"MultiAgentBatch(env_steps={self.env_steps}, {per})"
