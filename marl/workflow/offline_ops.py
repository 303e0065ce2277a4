"""The offline operators: `record` writes the batches that pass through it; `read_offline` is a source of
batches read from recorded files.

    sample --batch--> record(output) --batch--> ...        (offline.output: inserted after every sample node)
    read_offline(rows, shuffle) --batch--> learn --> ...    (BC, MARWIL, CQL: offline.input)

Both run in the driver process: `record` writes each item as it passes (one
folder per policy, see `marl.offline.writer`); `read_offline` iterates a Ray
Data dataset (read tasks on the local Ray instance or the cluster, see
`marl.offline.reader`).
"""

from __future__ import annotations

from marl.data.records import BATCH, SKIP, SampledBatch
from marl.execution import LocalIterator
from marl.execution import metrics as m
from marl.workflow.protocol import Operator
from marl.offline.writer import OfflineWriter
from marl.offline.reader import SHUFFLES
from marl.offline.reader import OfflineStream

ROWS_WRITTEN = "offline/rows_written"
FILES_WRITTEN = "offline/files_written"
ROWS_READ = "offline/rows_read"
EPOCHS_READ = "offline/epochs"


class Record(Operator):
    """Writes every batch that passes to Parquet (`output`, default `offline.output`) and passes it on unchanged."""

    op_name, consumes, produces, handles_skip = "record", (BATCH,), BATCH, True

    def __init__(self, output: str | None = None, max_file_mb: float | None = None):
        if max_file_mb is not None and not float(max_file_mb) > 0:
            raise ValueError(f"record.max_file_mb must be > 0, got {max_file_mb}")
        self.output, self.max_file_mb = output, max_file_mb
        self._writer = None
        self._published = 0  # files published by checkpoints (informational)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        off = ctx.config.offline_cfg
        output = self.output or off.output
        if not output:
            raise ValueError("record needs a folder: set its 'output' or 'offline.output'")
        self.close()
        mb = self.max_file_mb if self.max_file_mb is not None else off.output_max_file_mb
        writer = self._writer = OfflineWriter(output, ctx.possible_agents, int(mb * (1 << 20)), off.output_compression)
        counters, timer = ctx.metrics.counters, ctx.metrics.timers["record"]

        def record(item):
            if item is SKIP:
                return SKIP
            with timer.timing():
                before = len(writer.published)
                version = max(item.weights_versions) if item.weights_versions else counters[m.WEIGHTS_VERSION]
                counters[ROWS_WRITTEN] += writer.write(item.batch.policy_batches, version)
                counters[FILES_WRITTEN] += len(writer.published) - before
            return item

        return upstream.for_each(record)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def get_state(self) -> dict:
        """Taken with every checkpoint: the open files are published first, so a restored run (or a process killed
        after the checkpoint) has every row recorded up to it; the next rows go to new files."""
        if self._writer is not None:
            self._published += len(self._writer.close())
            self._writer.published.clear()
        return {"files_published": self._published}

    def set_state(self, state: dict) -> None:
        self._published = int(state.get("files_published", 0))


class ReadOffline(Operator):
    """Batches of `rows` recorded rows (default `training.train_batch_size`) from `offline.input`, routed to the
    trained policies by the run's mapping; the env steps they came from count as sampled.

    shuffle (default `offline.shuffle`): rows (file order and a bounded row buffer), files (file order only:
    each agent's pieces stay contiguous, which return-based losses need), none.
    """

    op_name, consumes, produces = "read_offline", (), BATCH

    def __init__(self, rows: int | None = None, shuffle: str | None = None):
        if rows is not None and int(rows) < 1:
            raise ValueError(f"read_offline.rows must be >= 1, got {rows}")
        if shuffle is not None and shuffle not in SHUFFLES:
            raise ValueError(f"read_offline.shuffle must be one of {list(SHUFFLES)}, got {shuffle!r}")
        self.rows, self.shuffle = (None if rows is None else int(rows)), shuffle
        self._stream = None
        self._pending: dict | None = None  # a checkpoint's position, for the stream `build` makes

    def get_state(self) -> dict:
        """The reader's position in its pass over the data (a restored run continues it)."""
        if self._stream is not None:
            return {"stream": self._stream.get_state()}
        return {"stream": self._pending or {"epochs": 0}}

    def set_state(self, state: dict) -> None:
        self._pending = dict(state["stream"])
        if self._stream is not None:
            self._stream.set_state(self._pending)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def build(self, ctx, inputs):
        config = ctx.config
        off = config.offline_cfg
        if not off.input:
            raise ValueError("read_offline needs recorded data: set 'offline.input' (a folder, a glob or a list)")
        trained = config.trained_policy_ids(list(config.policy_specs()))
        rows = self.rows or config.training_cfg.train_batch_size
        seed = config.debugging_cfg.seed
        self.close()
        stream = self._stream = OfflineStream(off.input, config.policy_mapping(), trained, rows, self.shuffle or off.shuffle,
                               off.shuffle_buffer_rows, seed, off.cache_mb)
        if self._pending is not None:
            stream.set_state(self._pending)
        metrics = ctx.metrics
        counters, timer = metrics.counters, metrics.timers["read_offline"]

        def gen():
            while True:
                with timer.timing():
                    batch, n = next(stream)
                counters[ROWS_READ] += n
                counters[EPOCHS_READ] = stream.epochs
                counters[m.ENV_STEPS_SAMPLED] += batch.env_steps
                counters[m.AGENT_STEPS_SAMPLED] += batch.agent_steps()
                yield SampledBatch(batch)

        return LocalIterator(gen, metrics, "read_offline")
