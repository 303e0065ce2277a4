"""Offline reading: memory while streaming a recorded dataset through Ray Data, by dataset size.

    .venv/bin/python benchmarks/speed/offline_stream.py --rows 2000000

Writes a synthetic recording (obs and next_obs of `--obs-dim` floats per row) with
marl's OfflineWriter, then streams it once with `OfflineStream` (cache off: what any
dataset over `offline.cache_mb` does) and, side by side in the same run, a tenth of it;
then the baseline that loads the whole table with pyarrow. Peak memory is the summed
RSS of this process and every Ray worker (sampled every 0.1 s). Flat memory: the two
streamed peaks are about equal, while the whole-table load grows with the data.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: this checkout's marl
import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

from marl.data import SampleBatch
from marl.data import sample_batch as sb


def write(folder: Path, rows: int, obs_dim: int, chunk: int = 50_000) -> float:
    from marl.offline.writer import OfflineWriter

    rng = np.random.default_rng(0)
    writer = OfflineWriter(folder, ["agent_0"], max_file_bytes=64 << 20, compression="snappy")
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        t = np.arange(start, start + n)
        writer.write({"p": SampleBatch({
            sb.OBS: rng.standard_normal((n, obs_dim), dtype=np.float32), sb.NEXT_OBS: rng.standard_normal((n, obs_dim), dtype=np.float32),
            sb.ACTIONS: rng.integers(0, 4, n), sb.REWARDS: rng.standard_normal(n, dtype=np.float32),
            sb.TERMINATEDS: (t % 500) == 499, sb.TRUNCATEDS: np.zeros(n, bool), sb.SEGMENT_END: (t % 500) == 499,
            sb.EPS_ID: t // 500, sb.AGENT_INDEX: np.zeros(n, np.int32), sb.T: (t % 500).astype(np.int32),
            sb.ACTION_LOGP: np.full(n, -1.38, np.float32),
        })}, weights_version=1)
    writer.close()
    return sum(f.stat().st_size for f in folder.rglob("*.parquet")) / 2**20


class PeakRSS:
    """Summed RSS of this process and its descendants (Ray's raylet, workers), sampled in a thread; and of this
    process alone (`driver_peak`). Ray workers started during the read count in the growth of the total."""

    def __init__(self):
        self.me, self.peak, self.driver_peak, self._stop = psutil.Process(), 0, 0, threading.Event()

    def _sample(self):
        total = 0
        for p in [self.me] + self.me.children(recursive=True):
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        self.peak = max(self.peak, total)
        self.driver_peak = max(self.driver_peak, self.me.memory_info().rss)
        return total

    def __enter__(self):
        self.base = self._sample()
        self.peak = self.base
        self.thread = threading.Thread(target=lambda: [self._sample() or time.sleep(0.1) for _ in iter(lambda: self._stop.is_set(), True)], daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()


def stream(folder: Path, batch_rows: int) -> tuple[int, float, int]:
    from marl.offline.reader import OfflineStream
    from marl.policies import PolicyMapping

    s = OfflineStream(str(folder), PolicyMapping(None, ["p"]), ["p"], batch_rows, shuffle="rows",
                      shuffle_buffer_rows=65_536, cache_mb=0)
    rows, started = 0, time.perf_counter()
    with PeakRSS() as mem:
        while s.epochs <= 1:
            _, n = next(s)
            rows += n
            if s.epochs > 1:
                break
    s.close()
    return rows, time.perf_counter() - started, mem.peak - mem.base, mem.driver_peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--obs-dim", type=int, default=8)
    parser.add_argument("--batch-rows", type=int, default=16384)
    args = parser.parse_args()
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    root = Path(tempfile.mkdtemp(prefix="marl-offline-bench-"))
    try:
        small_rows = args.rows // 10
        sizes = {}
        for name, rows in (("full", args.rows), ("tenth", small_rows)):
            t = time.perf_counter()
            sizes[name] = write(root / name, rows, args.obs_dim)
            print(f"wrote {rows:,} rows ({sizes[name]:.0f} MiB on disk) in {time.perf_counter() - t:.1f} s", flush=True)
        out_rows = []
        for name, rows in (("tenth", small_rows), ("full", args.rows)):
            n, secs, peak, driver = stream(root / name, args.batch_rows)
            out_rows.append(["marl OfflineStream (Ray Data) " + name, f"{n:,}", f"{secs:.1f}", f"{n / secs:,.0f}",
                          f"{peak / 2**20:.0f}", f"{driver / 2**20:.0f}"])
        import pyarrow.parquet as pq

        for name in ("tenth", "full"):
            with PeakRSS() as mem:
                t = time.perf_counter()
                table = pq.read_table(root / name)
                n = table.num_rows
                del table
                secs = time.perf_counter() - t
            out_rows.append(["baseline pyarrow read_table " + name, f"{n:,}", f"{secs:.1f}", f"{n / secs:,.0f}",
                          f"{(mem.peak - mem.base) / 2**20:.0f}", f"{mem.driver_peak / 2**20:.0f}"])
        C.print_table(["read", "rows", "s", "rows/s", "RSS growth, all MiB", "driver peak MiB"], out_rows)
        print(f"\n(machine: {psutil.cpu_count()} cores, load average {psutil.getloadavg()[0]:.1f}; shared with other jobs)")
    finally:
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
