"""The offline data format: one Parquet table per policy, one row per agent step (docs/offline_format.md).

    column            Parquet type                      meaning
    obs               fixed_size_list<float32>[d]       what the policy's module saw (after env->module connectors)
    next_obs          fixed_size_list<float32>[d]       the observation after the action (the row's own at a cut)
    actions           int64 | fixed_size_list<float32>  the action taken (discrete index, or a Box vector)
    rewards           float32                           reward received for the action
    terminateds       bool                              the agent's episode ended here (no bootstrap)
    truncateds        bool                              the agent's episode was cut here (time limit)
    segment_end       bool                              last row of the agent's piece in its sampled fragment
    eps_id            int64                             episode id (unique within a run)
    agent_id          string                            the env's agent name ("adversary_0", "agent_0", ...)
    agent_index       int32                             the agent's index in env.possible_agents
    policy_id         string                            the policy that acted
    t                 int32                             env step inside the episode at which the agent acted
    weights_version   int64                             learner weights version that acted
    action_logp       float32 (null: not recorded)      log-prob of the action under the acting policy
    action_mask       fixed_size_list<float32>[n]       legal actions (masked envs only)

Every file carries `marl.offline.schema_version` in its Parquet key-value
metadata. Readers accept every version in `READABLE_VERSIONS` and name the
version of any file they cannot read.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from marl.data import sample_batch as sb
from marl.data.columns import COLUMNS, MASK_SHAPED, OBS_SHAPED
from marl.errors import ConfigError

SCHEMA_VERSION = 1
READABLE_VERSIONS = (1,)
VERSION_KEY = b"marl.offline.schema_version"

AGENT_ID = "agent_id"
POLICY_ID = "policy_id"
SEGMENT_END = sb.SEGMENT_END
# Names, dtypes and per-row shapes are the runners' (`marl.data.columns`); this format adds the id strings and
# stores obs- and mask-shaped columns as fixed-size lists of float32 (VECTOR_COLUMNS).
VECTOR_COLUMNS = tuple(name for name, c in COLUMNS.items() if c.shape in (OBS_SHAPED, MASK_SHAPED))
SCALAR_COLUMNS = {name: COLUMNS[name].dtype for name in (
    sb.REWARDS, sb.TERMINATEDS, sb.TRUNCATEDS, SEGMENT_END, sb.EPS_ID, sb.AGENT_INDEX, sb.T, sb.WEIGHTS_VERSION)}
VECTOR_DTYPE = np.dtype(np.float32)
REQUIRED = (sb.OBS, sb.NEXT_OBS, sb.ACTIONS, sb.REWARDS, sb.TERMINATEDS, sb.TRUNCATEDS, SEGMENT_END, sb.EPS_ID,
            AGENT_ID, sb.AGENT_INDEX, POLICY_ID, sb.T, sb.WEIGHTS_VERSION, sb.ACTION_LOGP)
# What a SampleBatch read back holds (strings stay in the Arrow table; ids are routed by the reader).
NUMERIC = tuple(c for c in REQUIRED if c not in (AGENT_ID, POLICY_ID))


class OfflineFormatError(ConfigError):
    """A file that is not marl offline data, or of a schema version this marl cannot read (one line at the CLI)."""


def _vector(values: np.ndarray, dtype=VECTOR_DTYPE) -> pa.Array:
    values = np.ascontiguousarray(values, dtype=dtype).reshape(len(values), -1)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def to_table(batch: sb.SampleBatch, policy_id: str, agent_names: list[str], weights_version: int) -> pa.Table:
    """One policy's sampled rows as a table of the current schema version."""
    n = len(batch)
    cols = {}
    obs = batch[sb.OBS]
    cols[sb.OBS] = _vector(obs)
    cols[sb.NEXT_OBS] = _vector(batch[sb.NEXT_OBS] if sb.NEXT_OBS in batch else obs)
    actions = batch[sb.ACTIONS]
    cols[sb.ACTIONS] = pa.array(actions.astype(np.int64)) if actions.ndim == 1 and actions.dtype.kind in "iub" else _vector(actions)
    for name, dtype in SCALAR_COLUMNS.items():
        if name == sb.WEIGHTS_VERSION:
            cols[name] = pa.array(np.full(n, weights_version, dtype=dtype))
        else:
            cols[name] = pa.array(np.asarray(batch[name]).astype(dtype))
    names = np.asarray(agent_names, dtype=object)
    cols[AGENT_ID] = pa.array(names[batch[sb.AGENT_INDEX]], type=pa.string()).dictionary_encode()
    cols[POLICY_ID] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([policy_id]))
    logp = batch.get(sb.ACTION_LOGP)
    logp_dtype = COLUMNS[sb.ACTION_LOGP].dtype
    cols[sb.ACTION_LOGP] = pa.array(np.asarray(logp, logp_dtype)) if logp is not None else pa.nulls(n, pa.from_numpy_dtype(logp_dtype))
    for name in (sb.ACTION_MASK, sb.NEXT_ACTION_MASK):
        if name in batch:
            cols[name] = _vector(batch[name])
    table = pa.table(cols)
    return table.replace_schema_metadata({VERSION_KEY: str(SCHEMA_VERSION).encode()})


def check_version(schema: pa.Schema, where: str) -> int:
    """The file's schema version; OfflineFormatError naming it when this marl cannot read it."""
    meta = schema.metadata or {}
    if VERSION_KEY not in meta:
        raise OfflineFormatError(f"{where}: not marl offline data (no '{VERSION_KEY.decode()}' in its Parquet metadata)")
    raw = meta[VERSION_KEY].decode()
    try:
        version = int(raw)
    except ValueError:
        raise OfflineFormatError(f"{where}: schema version {raw!r} is not a number") from None
    if version not in READABLE_VERSIONS:
        raise OfflineFormatError(
            f"{where}: offline schema version {version}; this marl reads versions {list(READABLE_VERSIONS)} "
            f"(written by a {'newer' if version > SCHEMA_VERSION else 'retired'} marl)"
        )
    missing = [c for c in REQUIRED if c not in schema.names]
    if missing:
        raise OfflineFormatError(f"{where}: schema version {version} file lacks column(s) {missing}")
    return version


def _column_numpy(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        width = column.type.list_size
        return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), width)
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        # Policies with different widths read as one dataset: Ray Data unifies fixed-size lists to lists.
        # One row per object (every batch alike, so cached blocks concatenate); stacked per policy later.
        lengths = column.value_lengths().to_numpy(zero_copy_only=False)
        values = column.flatten().to_numpy(zero_copy_only=False)
        out = np.empty(len(column), dtype=object)
        out[:] = np.split(values, np.cumsum(lengths)[:-1])
        return out
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if column.null_count:
        return column.to_numpy(zero_copy_only=False).astype(np.float32)  # nulls -> nan (e.g. no action_logp)
    return column.to_numpy(zero_copy_only=False)


def to_columns(table: pa.Table) -> dict[str, np.ndarray]:
    """Arrow rows -> NumPy columns (vectors as 2-D arrays; agent and policy ids as object arrays of str)."""
    return {name: _column_numpy(table.column(name)) for name in table.column_names}


def to_sample_batch(columns: dict[str, np.ndarray]) -> sb.SampleBatch:
    """The numeric columns as a SampleBatch (id strings dropped; the mapping routed them already)."""
    keep = {k: v for k, v in columns.items() if k not in (AGENT_ID, POLICY_ID)}
    for name, value in keep.items():  # rows of one policy: vectors of one width, stacked
        if value.dtype == object:
            keep[name] = np.stack(list(value)) if len(value) else np.zeros((0, 0), np.float32)
    for name in (sb.OBS, sb.NEXT_OBS):
        keep[name] = keep[name].astype(VECTOR_DTYPE, copy=False)
    for name, dtype in SCALAR_COLUMNS.items():  # as the runners' batches hold them
        if name in keep:
            keep[name] = keep[name].astype(dtype, copy=False)
    return sb.SampleBatch(keep)
