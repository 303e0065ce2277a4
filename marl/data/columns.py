"""The one column schema: every column a policy's batch may hold, its per-row shape, dtype and where it lives.

Runners (`marl.runners.collector`, the batched path's `marl.runners.batched_fragment`), the policy server
(`marl.external.server`) and the offline format (`marl.offline.schema`) build their batches from
`columns_for`, so the same config gives the same names, shapes and dtypes on every path.

    column              per-row shape   dtype        kind    present
    obs                 obs             obs dtype    row     always
    actions             action          action dtype row     always
    rewards             scalar          float32      row     always
    terminateds         scalar          bool         row     always
    truncateds          scalar          bool         row     always
    eps_id              scalar          int64        row     always
    agent_index         scalar          int32        row     always
    env_index           scalar          int32        row     always
    t                   scalar          int32        row     always
    action_mask         mask            float32      row     masked action spaces
    action_logp         scalar          float32      row     requested
    vf_preds            scalar          float32      row     requested
    bootstrap_value     scalar          float32      row     requested (with vf_preds)
    next_obs            obs             obs dtype    row     requested
    next_action_mask    mask            float32      row     requested (with next_obs), masked spaces
    state               state           state dtype  table   requested: row column `state.index` (int64)
    next_state          state           state dtype  table   requested (a view of table `state`): `next_state.index`
    state_in.<name>     the state's     the state's  table   stateful modules: row column `state_in.index`
    episode_start       scalar          bool         row     stateful modules
    segment_end         scalar          bool         row     always (set when the batch is built)
    weights_version     scalar          int64        row     offline data only (`marl.offline.schema`)

A table's rows are shared by many batch rows and joined through its index column
(`sample_batch.table_index`); `columns_for` lists both: the table (`table=True`, its shape that of one table row)
and its index column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marl.data import sample_batch as sb
from marl.errors import ConfigError

# Per-row shape rules: resolved against a policy's layout by `columns_for`.
SCALAR, OBS_SHAPED, ACTION_SHAPED, MASK_SHAPED, STATE_SHAPED = "scalar", "obs", "action", "mask", "state"
LAYOUT_DTYPE = None  # the dtype comes from the layout (the obs's, the action's, the state's)


@dataclass(frozen=True)
class Column:
    """A column's rule: its per-row shape rule, its dtype (None: the layout's) and whether it is a table."""

    shape: str
    dtype: np.dtype | None
    table: bool = False


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a policy's batch, resolved: its shape per row (per table row for a table) and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    table: bool = False


def _c(shape: str, dtype=LAYOUT_DTYPE, table: bool = False) -> Column:
    return Column(shape, None if dtype is None else np.dtype(dtype), table)


# Every column by name, in the order a runner's batch holds them.
COLUMNS: dict[str, Column] = {
    sb.OBS: _c(OBS_SHAPED),
    sb.ACTIONS: _c(ACTION_SHAPED),
    sb.REWARDS: _c(SCALAR, np.float32),
    sb.TERMINATEDS: _c(SCALAR, np.bool_),
    sb.TRUNCATEDS: _c(SCALAR, np.bool_),
    sb.EPS_ID: _c(SCALAR, np.int64),
    sb.AGENT_INDEX: _c(SCALAR, np.int32),
    sb.ENV_INDEX: _c(SCALAR, np.int32),
    sb.T: _c(SCALAR, np.int32),
    sb.ACTION_MASK: _c(MASK_SHAPED, np.float32),
    sb.ACTION_LOGP: _c(SCALAR, np.float32),
    sb.VF_PREDS: _c(SCALAR, np.float32),
    sb.BOOTSTRAP_VALUE: _c(SCALAR, np.float32),  # V(s') at piece ends that are not terminations
    sb.NEXT_OBS: _c(OBS_SHAPED),
    sb.NEXT_ACTION_MASK: _c(MASK_SHAPED, np.float32),
    sb.STATE: _c(STATE_SHAPED, table=True),
    sb.NEXT_STATE: _c(STATE_SHAPED, table=True),
    sb.EPISODE_START: _c(SCALAR, np.bool_),
    sb.SEGMENT_END: _c(SCALAR, np.bool_),
    sb.STATE_IN_INDEX: _c(SCALAR, np.int64),
    sb.WEIGHTS_VERSION: _c(SCALAR, np.int64),
}
INDEX_DTYPE = np.dtype(np.int64)  # a table's index column

# What an algorithm may ask runners for (action masks come with masked action spaces, unasked).
REQUESTABLE = frozenset({sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE, sb.NEXT_OBS, sb.NEXT_ACTION_MASK, sb.STATE, sb.NEXT_STATE})
ALWAYS = (sb.OBS, sb.ACTIONS, sb.REWARDS, sb.TERMINATEDS, sb.TRUNCATEDS, sb.EPS_ID, sb.AGENT_INDEX, sb.ENV_INDEX, sb.T)
# Set when a batch is built from its rows (not written per step).
BUILT = (sb.SEGMENT_END, sb.STATE_IN_INDEX)


def check_columns(columns, policy_id: str) -> frozenset:
    """The requested columns of a policy, checked: known names, and what each needs alongside it."""
    columns = frozenset(columns)
    unknown = sorted(columns - REQUESTABLE)
    if unknown:
        raise ConfigError(
            f"policy '{policy_id}': unknown sample column(s) {unknown}; runners can record {sorted(REQUESTABLE)}"
        )
    if sb.BOOTSTRAP_VALUE in columns and sb.VF_PREDS not in columns:  # rows with no next obs use their own value
        raise ConfigError(f"policy '{policy_id}': sample column '{sb.BOOTSTRAP_VALUE}' needs '{sb.VF_PREDS}' too")
    if sb.NEXT_ACTION_MASK in columns and sb.NEXT_OBS not in columns:
        raise ConfigError(f"policy '{policy_id}': sample column '{sb.NEXT_ACTION_MASK}' needs '{sb.NEXT_OBS}' too")
    if sb.NEXT_STATE in columns and not {sb.STATE, sb.NEXT_OBS} <= columns:
        raise ConfigError(f"policy '{policy_id}': sample column '{sb.NEXT_STATE}' needs '{sb.STATE}' and '{sb.NEXT_OBS}' too")
    return columns


def columns_for(obs_shape, obs_dtype, action_shape, action_dtype, requested=frozenset(), mask_dim: int | None = None,
                state_dim: int | None = None, state_dtype=np.float32, module_state: dict | None = None
                ) -> dict[str, ColumnSpec]:
    """name -> ColumnSpec of the batches a policy's rows make (the module's layout: `obs_shape`/`obs_dtype` after
    the env->module connectors, `action_shape`/`action_dtype` the module's action layout; `mask_dim` for masked
    action spaces; `requested` checked by `check_columns`; `state_dim` the global state's size when `state` is
    requested; `module_state` a stateful module's initial state {name: array})."""
    shapes = {SCALAR: (), OBS_SHAPED: tuple(int(d) for d in obs_shape), ACTION_SHAPED: tuple(action_shape),
              MASK_SHAPED: None if mask_dim is None else (int(mask_dim),),
              STATE_SHAPED: None if state_dim is None else (int(state_dim),)}
    layout = {sb.OBS: obs_dtype, sb.NEXT_OBS: obs_dtype, sb.ACTIONS: action_dtype, sb.STATE: state_dtype,
              sb.NEXT_STATE: state_dtype}
    names = list(ALWAYS)
    if mask_dim is not None:
        names.append(sb.ACTION_MASK)
    names += [n for n in (sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE, sb.NEXT_OBS) if n in requested]
    if sb.NEXT_OBS in requested and mask_dim is not None and sb.NEXT_ACTION_MASK in requested:
        names.append(sb.NEXT_ACTION_MASK)  # so a Q target maximises over legal moves only
    if sb.STATE in requested and state_dim is None:
        raise ValueError("the 'state' column needs the env's global state size")
    names += [n for n in (sb.STATE, sb.NEXT_STATE) if n in requested]
    out = {}
    for name in names:
        rule = COLUMNS[name]
        out[name] = ColumnSpec(name, shapes[rule.shape], np.dtype(layout[name] if rule.dtype is None else rule.dtype), rule.table)
        if rule.table:
            out[sb.table_index(name)] = ColumnSpec(sb.table_index(name), (), INDEX_DTYPE)
    for name, value in (module_state or {}).items():  # the state entering each training sequence
        value = np.asarray(value)
        out[sb.state_in_column(name)] = ColumnSpec(sb.state_in_column(name), tuple(value.shape), value.dtype, table=True)
    if module_state:
        out[sb.EPISODE_START] = ColumnSpec(sb.EPISODE_START, (), COLUMNS[sb.EPISODE_START].dtype)
        out[sb.STATE_IN_INDEX] = ColumnSpec(sb.STATE_IN_INDEX, (), COLUMNS[sb.STATE_IN_INDEX].dtype)
    out[sb.SEGMENT_END] = ColumnSpec(sb.SEGMENT_END, (), COLUMNS[sb.SEGMENT_END].dtype)
    return out


def row_specs(specs: dict[str, ColumnSpec]) -> dict[str, ColumnSpec]:
    """The row columns of `specs` (their tables left out)."""
    return {name: s for name, s in specs.items() if not s.table}


def assemble(specs: dict[str, ColumnSpec], values: dict) -> dict[str, np.ndarray]:
    """`values` (name -> one value per row) as the row columns of `specs`, in their dtypes and per-row shapes (a
    flat action row of a many-dimensional Box laid out as the runners lay it), checked: the same names, each row of
    its column's size."""
    rows = row_specs(specs)
    if set(values) != set(rows):
        raise ValueError(f"columns {sorted(values)} differ from the schema's {sorted(rows)}")
    out = {}
    for name, spec in rows.items():
        arr = np.asarray(values[name], spec.dtype)
        if arr.ndim == 0 or int(np.prod(arr.shape[1:])) != int(np.prod(spec.shape)):
            raise ValueError(f"column '{name}' has rows of shape {arr.shape[1:]}, the schema's are {spec.shape}")
        out[name] = arr.reshape((len(arr),) + spec.shape)
    return out
