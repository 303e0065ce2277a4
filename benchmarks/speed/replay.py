"""Replay sampling latency from a full 1M-transition buffer: uniform vs prioritised.

    .venv/bin/python benchmarks/speed/replay.py [--capacity 1000000] [--batch 256] [--obs-dim 18] [--repeats 5]

The buffer holds DQN transitions (obs, next_obs of `--obs-dim` float32, action,
reward, terminated, discount, agent index). Measured, interleaved in one
process, median of repeats of 2,000 calls each:

- baseline: drawing 256 random indices and gathering the same columns with
  plain NumPy fancy indexing (the floor any buffer pays);
- `ReplayBuffer.sample(256)` (uniform);
- `PrioritizedReplayBuffer.sample(256)` (sum-tree descent + importance weights);
- `PrioritizedReplayBuffer.update_priorities` for 256 rows;
- adding a 1,000-row batch (a sampling round) to each buffer.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.replay import DISCOUNTS, PrioritizedReplayBuffer, ReplayBuffer


def transitions(n: int, obs_dim: int, rng) -> SampleBatch:
    return SampleBatch({
        sb.OBS: rng.standard_normal((n, obs_dim), dtype=np.float32),
        sb.NEXT_OBS: rng.standard_normal((n, obs_dim), dtype=np.float32),
        sb.ACTIONS: rng.integers(0, 5, n),
        sb.REWARDS: rng.standard_normal(n, dtype=np.float32),
        sb.TERMINATEDS: rng.random(n) < 0.01,
        DISCOUNTS: np.full(n, 0.99, np.float32),
        sb.AGENT_INDEX: rng.integers(0, 3, n).astype(np.int32),
    })


def per_call_us(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capacity", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--obs-dim", type=int, default=18, help="18: simple_spread's observation")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    print(f"Replay benchmark: {C.machine_line()}")
    rng = np.random.default_rng(0)

    uniform = ReplayBuffer(args.capacity, seed=0)
    prioritized = PrioritizedReplayBuffer(args.capacity, alpha=0.6, beta=0.4, seed=0)
    t0 = time.perf_counter()
    chunk = 100_000
    for start in range(0, args.capacity, chunk):
        batch = transitions(min(chunk, args.capacity - start), args.obs_dim, rng)
        uniform.add(batch)
        prioritized.add(batch)
    fill_s = time.perf_counter() - t0
    prioritized.update_priorities(np.arange(args.capacity), rng.exponential(1.0, args.capacity))
    print(f"filled two {args.capacity:,}-row buffers in {fill_s:.1f} s; "
          f"{uniform.columns[sb.OBS].nbytes * 2 / 2**20:,.0f} MiB of obs + next_obs each")
    cols = uniform.columns
    round_batch = transitions(1000, args.obs_dim, rng)
    td = rng.exponential(1.0, args.batch)

    def baseline():
        idx = rng.integers(0, args.capacity, args.batch)
        return {k: v[idx] for k, v in cols.items()}

    last_idx = [np.arange(args.batch)]

    def sample_prioritized():
        _, last_idx[0] = prioritized.sample(args.batch)

    cases = {
        "numpy gather (baseline)": baseline,
        "uniform sample": lambda: uniform.sample(args.batch),
        "prioritized sample": sample_prioritized,
        "prioritized update_priorities": lambda: prioritized.update_priorities(last_idx[0], td),
        "uniform add 1,000 rows": lambda: uniform.add(round_batch),
        "prioritized add 1,000 rows": lambda: prioritized.add(round_batch),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeats):  # interleaved: each repeat measures every case once
        for name, fn in cases.items():
            times[name].append(per_call_us(fn, args.calls))
    base = C.median(times["numpy gather (baseline)"])
    rows = []
    for name in cases:
        med = C.median(times[name])
        rows.append([name, f"{med:,.1f}", C.spread(times[name]), f"{med / base:.2f}x"])
    C.print_table(
        ["operation", "median us/call", "spread", "vs numpy gather"],
        rows,
        title=f"{args.batch}-row batches from a full {args.capacity:,}-row buffer (obs dim {args.obs_dim})",
    )


if __name__ == "__main__":
    main()
