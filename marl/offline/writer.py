"""Writes sampled rows as Parquet, one folder per policy, files rotated by size and published atomically.

    DIR/<policy_id>/part-<run>-<seq>.parquet

A file is written under a hidden temporary name (`.part-....parquet.tmp`, which
neither readers' globs nor Ray Data's listing pick up) and renamed into place
when it is closed: at `max_file_bytes`, or when the recorder closes. So a reader
never sees a half-written file; rows of a file still open when the process
dies are lost (at most one file's worth per policy).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from marl.data import SampleBatch
from marl.offline.schema import to_table


class _PolicyFile:
    def __init__(self, folder: Path, run: str, max_file_bytes: int, compression: str):
        self.folder, self.run, self.max_file_bytes, self.compression = folder, run, max_file_bytes, compression
        self.seq = 0
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.tmp: Path | None = None
        self.final: Path | None = None
        self.rows_in_file = 0

    def write(self, table: pa.Table) -> list[Path]:
        published = []
        if self.writer is not None and not table.schema.equals(self.schema, check_metadata=False):
            published += self.close()  # a new column (say, an action mask): a new file
        if self.writer is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            name = f"part-{self.run}-{self.seq:05d}.parquet"
            self.seq += 1
            self.final, self.tmp = self.folder / name, self.folder / f".{name}.tmp"
            self.schema = table.schema
            self.writer = pq.ParquetWriter(self.tmp, table.schema, compression=self.compression)
        self.writer.write_table(table)
        self.rows_in_file += table.num_rows
        if self.tmp.stat().st_size >= self.max_file_bytes:
            published += self.close()
        return published

    def close(self) -> list[Path]:
        if self.writer is None:
            return []
        self.writer.close()
        os.replace(self.tmp, self.final)  # atomic on POSIX: the file appears whole or not at all
        done, self.writer, self.rows_in_file = self.final, None, 0
        return [done]


class OfflineWriter:
    """Per-policy Parquet files under `output` (see the module doc). Not thread-safe; one per process."""

    def __init__(self, output: str | os.PathLike, agent_names: list[str], max_file_bytes: int = 64 << 20,
                 compression: str = "zstd"):
        self.output = Path(output)
        self.agent_names = list(agent_names)
        self.max_file_bytes = int(max_file_bytes)
        self.compression = compression
        self.run = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"  # unique across processes and runs
        self.files: dict[str, _PolicyFile] = {}
        self.rows_written: dict[str, int] = {}
        self.published: list[Path] = []

    def write(self, policy_batches: dict[str, SampleBatch], weights_version: int) -> int:
        """Appends each policy's rows; returns the rows written."""
        total = 0
        for pid, batch in policy_batches.items():
            if not len(batch):
                continue
            table = to_table(batch.to_numpy(), pid, self.agent_names, weights_version)  # (files hold NumPy)
            f = self.files.get(pid)
            if f is None:
                f = self.files[pid] = _PolicyFile(self.output / pid, self.run, self.max_file_bytes, self.compression)
            self.published += f.write(table)
            self.rows_written[pid] = self.rows_written.get(pid, 0) + len(batch)
            total += len(batch)
        return total

    def close(self) -> list[Path]:
        """Publishes every open file; returns all files this writer published."""
        for f in self.files.values():
            self.published += f.close()
        return list(self.published)

