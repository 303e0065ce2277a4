"""Reads recorded Parquet files through Ray Data, streaming, and routes rows to policies by the mapping.

    ray.data.read_parquet(files, shuffle="files")           file order shuffled every epoch
        .iter_batches(batch_size=rows, batch_format="pyarrow",
                      local_shuffle_buffer_size=buffer)      rows shuffled within a bounded buffer
        -> agent_id -> policy (the run's mapping) -> {policy: SampleBatch}

Nothing is loaded whole: Ray Data's streaming executor reads blocks as the
iterator asks for them, so memory stays flat however large the dataset is.
Read tasks run on the Ray instance the process is connected to: a local one
started in-process (`ray.init(address="local")`) when none is, the cluster's
nodes when `RAY_ADDRESS` names one. Each epoch iterates the dataset again,
except for a dataset no larger than `cache_mb` on disk: its first epoch streams
through Ray Data and keeps the rows, later epochs reshuffle them in memory
(starting a Ray Data execution costs seconds, too much to pay per epoch of a
small dataset).

Checkpoints keep the position in the pass (`get_state`: the epoch, the batches read of it, the
generator state it started with): a restored stream continues the same pass instead of starting
a fresh one. Cached epochs continue exactly (the cache is refilled by streaming the data once,
unseen); a streamed epoch continues after as many batches, its file order the same (seeded per
epoch) but its rows as Ray Data's parallel read tasks deliver them.
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from marl.data import MultiAgentBatch, SampleBatch
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.offline.schema import AGENT_ID, SEGMENT_END, OfflineFormatError, check_version, to_columns, to_sample_batch
from marl.execution.ray_init import ensure_ray

SHUFFLES = ("rows", "files", "none")


def resolve_files(spec) -> list[str]:
    """`offline.input`: a folder (every *.parquet below it), a glob, a file, or a list of these; remote URIs
    (`s3://...`) pass through to Ray Data as they are."""
    items = [spec] if isinstance(spec, (str, Path)) else list(spec or [])
    if not items:
        raise ConfigError("'offline.input' is empty: give a folder, a glob or a list of them")
    files: list[str] = []
    for item in items:
        item = str(item)
        if "://" in item:
            files.append(item)
            continue
        path = Path(item)
        if path.is_dir():
            found = sorted(str(p) for p in path.rglob("*.parquet") if not any(part.startswith(".") for part in p.relative_to(path).parts))
        elif any(ch in item for ch in "*?["):
            found = sorted(p for p in glob.glob(item, recursive=True) if p.endswith(".parquet"))
        elif path.is_file():
            found = [str(path)]
        else:
            raise ConfigError(f"'offline.input' entry '{item}' does not exist (give a folder, a glob or a file)")
        if not found:
            raise ConfigError(f"'offline.input' entry '{item}' holds no .parquet files")
        files.extend(found)
    return files


def check_files(files: list[str]) -> dict[int, int]:
    """Reads every local file's footer: {schema version: files}; OfflineFormatError naming a bad file."""
    versions: dict[int, int] = {}
    for f in files:
        if "://" in f:
            continue
        try:
            schema = pq.read_schema(f)
        except Exception as err:  # pyarrow raises several types for a non-Parquet file
            raise OfflineFormatError(f"{f}: not a Parquet file ({err})") from None
        v = check_version(schema, f)
        versions[v] = versions.get(v, 0) + 1
    return versions


def segment_ends(columns: dict[str, np.ndarray]) -> np.ndarray:
    """Row i ends its agent's piece when recorded so, when row i+1 is another (episode, agent), or at the end."""
    end = np.asarray(columns[SEGMENT_END], dtype=bool).copy()
    eps, agent = columns[sb.EPS_ID], columns[sb.AGENT_INDEX]
    if len(end):
        end[:-1] |= (eps[1:] != eps[:-1]) | (agent[1:] != agent[:-1])
        end[-1] = True
    return end


def env_steps_of(columns: dict[str, np.ndarray]) -> int:
    """Distinct (episode, step) pairs among the rows: the env steps they came from."""
    if not len(columns[sb.EPS_ID]):
        return 0
    keys = np.stack([columns[sb.EPS_ID], columns[sb.T].astype(np.int64)], axis=1)
    return int(len(np.unique(keys, axis=0)))


class OfflineStream:
    """An endless iterator of `(MultiAgentBatch, rows read)`, one Ray Data batch of `batch_rows` rows each."""

    def __init__(self, spec, mapping, trained: list[str], batch_rows: int, shuffle: str = "rows",
                 shuffle_buffer_rows: int = 50_000, seed: int | None = None, cache_mb: float = 0.0):
        import ray.data


        if shuffle not in SHUFFLES:
            raise ConfigError(f"'offline.shuffle' must be one of {list(SHUFFLES)}, got {shuffle!r}")
        self.files = resolve_files(spec)
        self.versions = check_files(self.files)
        self.mapping, self.trained = mapping, set(trained)
        self.batch_rows, self.shuffle, self.buffer, self.seed = int(batch_rows), shuffle, int(shuffle_buffer_rows), seed
        self._policy_of: dict[str, str] = {}
        ensure_ray()
        ray.data.DataContext.get_current().enable_progress_bars = False  # one progress log per epoch otherwise
        self.dataset = ray.data.read_parquet(self.files, shuffle="files" if shuffle != "none" else None)
        self.epochs = 0
        self._epoch_batches = 0  # batches of the current epoch read
        self._epoch_rng: dict | None = None  # the generator's state when the current epoch began
        self._resume: dict | None = None
        self._it = None
        local = [f for f in self.files if "://" not in f]
        self.cached = len(local) == len(self.files) and sum(os.path.getsize(f) for f in local) <= cache_mb * (1 << 20)
        self.rng = np.random.default_rng(seed)

    def _streamed(self):
        """One epoch through Ray Data: column dicts of `batch_rows` rows."""
        seed = None if self.seed is None else self.seed + self.epochs
        dataset = self.dataset
        if seed is not None and self.shuffle != "none":  # a file order of its own per epoch, the same after a restore
            import ray.data

            dataset = ray.data.read_parquet(self.files, shuffle=ray.data.FileShuffleConfig(seed=seed, reseed_after_execution=False))
        for table in dataset.iter_batches(
            batch_size=self.batch_rows, batch_format="pyarrow", drop_last=False,
            local_shuffle_buffer_size=self.buffer if self.shuffle == "rows" else None,
            local_shuffle_seed=seed if self.shuffle == "rows" else None,
        ):
            yield to_columns(table)

    def _from_cache(self, blocks: list[dict]):
        """One epoch over the kept rows: permuted (rows), in shuffled block order (files) or as read (none)."""
        if self.shuffle == "files":
            blocks = [blocks[i] for i in self.rng.permutation(len(blocks))]
        whole = {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0]}
        n = len(whole[sb.EPS_ID])
        order = self.rng.permutation(n) if self.shuffle == "rows" else None
        for start in range(0, n, self.batch_rows):
            rows = slice(start, start + self.batch_rows) if order is None else order[start:start + self.batch_rows]
            yield {k: v[rows] for k, v in whole.items()}

    def _batches(self):
        kept: list[dict] = []
        resume, self._resume = self._resume, None
        skip = 0
        if resume is not None and resume["epochs"] > 0:
            if self.cached and resume["epochs"] > 1:  # refill the cache: the first epoch streams again, unseen
                self.epochs = 1
                kept = list(self._streamed())
            self.epochs, skip = resume["epochs"] - 1, resume["batches"]
            self.rng.bit_generator.state = json.loads(resume["rng"])
        while True:
            self.epochs += 1
            self._epoch_rng, self._epoch_batches = self.rng.bit_generator.state, 0
            epoch = self._from_cache(kept) if kept else self._streamed()
            yielded = False
            for columns in epoch:
                yielded = True
                if self.cached and self.epochs == 1:
                    kept.append(columns)
                self._epoch_batches += 1
                if skip:  # read before the checkpoint
                    skip -= 1
                    continue
                yield columns
            if not yielded:
                raise OfflineFormatError(f"offline input {self.files[:3]}{'...' if len(self.files) > 3 else ''} holds no rows")

    def get_state(self) -> dict:
        """The position in the pass: epoch, batches read of it, and the generator state the epoch began with."""
        if self._resume is not None:
            return dict(self._resume)
        if not self.epochs:
            return {"epochs": 0}
        return {"epochs": self.epochs, "batches": self._epoch_batches, "rng": json.dumps(self._epoch_rng)}

    def set_state(self, state: dict) -> None:
        """Continue from `get_state()`'s position (before the first batch is read)."""
        self.close()
        self._resume = {"epochs": int(state["epochs"]), "batches": int(state.get("batches", 0)), "rng": state.get("rng")}

    def _route(self, agent_ids: np.ndarray) -> np.ndarray:
        """Each row's policy by the run's mapping (not the one recorded: data can be re-mapped)."""
        names = np.unique(agent_ids)
        for name in names:
            if name not in self._policy_of:
                self._policy_of[name] = self.mapping(str(name), None)
        lookup = {n: self._policy_of[n] for n in names}
        return np.vectorize(lookup.__getitem__, otypes=[object])(agent_ids) if len(agent_ids) else agent_ids

    def __iter__(self):
        return self

    def close(self) -> None:
        """Stops the Ray Data execution in flight (before Ray shuts down, not at interpreter exit)."""
        if self._it is not None:
            self._it.close()
            self._it = None

    def __next__(self) -> tuple[MultiAgentBatch, int]:
        if self._it is None:
            self._it = self._batches()
        columns = next(self._it)
        policies = self._route(columns[AGENT_ID])
        env_steps = env_steps_of(columns)
        out: dict[str, SampleBatch] = {}
        for pid in sorted(set(policies.tolist())):
            if pid not in self.trained:
                continue
            rows = np.flatnonzero(policies == pid)  # row order kept: pieces stay contiguous (MARWIL's returns)
            picked = {k: v[rows] for k, v in columns.items()}
            picked[SEGMENT_END] = segment_ends(picked)
            out[pid] = to_sample_batch(picked)
        return MultiAgentBatch(out, env_steps), len(columns[sb.EPS_ID])
