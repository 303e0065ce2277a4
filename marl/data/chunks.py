"""Where a stateful module's training sequences start, and the states stored there.

A policy batch holds each agent's trajectory pieces as contiguous rows in step
order, the last row of each piece flagged `segment_end` (`marl.runners.collector`).
`SequencePlan` cuts every piece into chunks of at most `max_seq_len` rows. The
runner applies the same plan to each fragment it builds and keeps the module
state only at the chunks' first rows: tables `state_in.<name>` (one row per chunk)
joined through the shared index column `state_in.index` (-1 on rows that start no
chunk), instead of a copy of the state on every row. With R2D2's burn-in
(`training.burn_in` of a recurrent Q network) the rows where each chunk's burn-in
begins keep their state too. Pieces never span fragments,
so the chunks of concatenated fragments are the fragments' own chunks, and the
learner (`marl.learners.sequences`) and sequence replay (`marl.replay.sequences`)
find a stored state at every chunk they cut.
"""

from __future__ import annotations

import numpy as np

from marl.data import sample_batch as sb


class SequencePlan:
    """The chunks of one policy batch: `starts` (first row of each) and `lens`."""

    def __init__(self, segment_end: np.ndarray, max_seq_len: int):
        n = len(segment_end)
        ends = np.flatnonzero(segment_end)
        if n and (len(ends) == 0 or ends[-1] != n - 1):
            ends = np.append(ends, n - 1)  # a batch cut mid-piece: its tail is a piece too
        piece_starts = np.r_[0, ends[:-1] + 1] if n else np.zeros(0, np.int64)
        piece_lens = ends + 1 - piece_starts if n else np.zeros(0, np.int64)
        chunks = -(-piece_lens // max_seq_len)
        first_chunk = np.repeat(np.cumsum(chunks) - chunks, chunks)
        within = np.arange(int(chunks.sum())) - first_chunk
        self.starts = (np.repeat(piece_starts, chunks) + within * max_seq_len).astype(np.int64)
        self.lens = np.minimum(max_seq_len, np.repeat(piece_starts + piece_lens, chunks) - self.starts).astype(np.int64)
        self.piece_starts = np.repeat(piece_starts, chunks).astype(np.int64)  # first row of each chunk's piece
        self.max_seq_len = max_seq_len

    def burn_in_starts(self, burn_in: int) -> np.ndarray:
        """Where each chunk's burn-in begins: up to `burn_in` rows earlier, never before its piece's start."""
        return np.maximum(self.piece_starts, self.starts - burn_in) if burn_in else self.starts

    def stored_rows(self, burn_in: int = 0) -> np.ndarray:
        """The rows whose entering state a batch keeps: chunk starts, and burn-in starts (sequence replay)."""
        return np.union1d(self.starts, self.burn_in_starts(burn_in)) if burn_in else self.starts

    def __len__(self) -> int:
        return len(self.starts)

    def rows(self, chosen: np.ndarray) -> np.ndarray:
        """The row indices of the chosen chunks, end to end in the order given."""
        lens = self.lens[chosen]
        offsets = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        return np.repeat(self.starts[chosen], lens) + offsets


def state_names(batch: sb.SampleBatch) -> list[str]:
    """The names of the module states a batch carries (as chunk-start tables or, hand-made, per-row columns)."""
    prefix = sb.STATE_IN + "."
    names = [k[len(prefix):] for k in batch.tables if k.startswith(prefix)]
    names += [k[len(prefix):] for k in batch.keys() if k.startswith(prefix) and k != sb.STATE_IN_INDEX]
    return list(dict.fromkeys(names))


def states_at(batch: sb.SampleBatch, name: str, rows: np.ndarray) -> np.ndarray:
    """State `name` entering each of `rows` (rows that start a chunk), from the chunk-start table.

    A batch built by hand may carry the state per row (column `state_in.<name>`) instead."""
    column = sb.state_in_column(name)
    if column in batch.columns:
        return batch.columns[column][rows]
    if column not in batch.tables:
        raise ValueError(f"the batch of a stateful module lacks state '{name}': runners record it for stateful modules")
    index = batch.columns[sb.STATE_IN_INDEX][rows]
    if len(index) and index.min() < 0:
        bad = np.asarray(rows).reshape(-1)[np.flatnonzero(index.reshape(-1) < 0)[:3]].tolist()
        raise ValueError(
            f"rows {bad} start a sequence but the batch stores no state '{name}' for them: the batch was cut "
            "elsewhere than where its max_seq_len chunks start (runners and learners must use the same "
            "model.max_seq_len, and a stateful policy's batch must not be sliced mid-piece)"
        )
    return batch.tables[column][index]


def chunk_start_index(n_rows: int, rows: np.ndarray) -> np.ndarray:
    """The `state_in.index` column of a batch whose state tables hold one row for each of `rows` (in order)."""
    index = np.full(n_rows, -1, np.int64)
    index[rows] = np.arange(len(rows))
    return index
