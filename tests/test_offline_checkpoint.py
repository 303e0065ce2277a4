"""Offline data and checkpoints: a checkpoint publishes the recording's open files (no row lost), and the reader's
position in its pass is checkpoint state (a restored run continues the pass, exactly for cached data)."""

from __future__ import annotations

import glob

import numpy as np
import pyarrow.parquet as pq

import marl
from marl.data import sample_batch as sb
from marl.offline.reader import OfflineStream
from marl.offline.writer import OfflineWriter
from marl.policies import PolicyMapping



def tiny_batch(n, eps):
    rows = n
    from marl.data import SampleBatch

    return SampleBatch({
        sb.OBS: np.arange(rows * 3, dtype=np.float32).reshape(rows, 3), sb.NEXT_OBS: np.ones((rows, 3), np.float32),
        sb.ACTIONS: np.arange(rows) % 2, sb.REWARDS: np.ones(rows, np.float32),
        sb.TERMINATEDS: np.zeros(rows, bool), sb.TRUNCATEDS: np.zeros(rows, bool), sb.SEGMENT_END: np.zeros(rows, bool),
        sb.EPS_ID: np.full(rows, eps, np.int64), sb.AGENT_INDEX: np.zeros(rows, np.int32),
        sb.ENV_INDEX: np.zeros(rows, np.int32), sb.T: np.arange(n, dtype=np.int32),
        sb.ACTION_LOGP: np.full(rows, -0.69, np.float32),
    })


def published_rows(folder) -> int:
    return sum(pq.read_metadata(f).num_rows for f in glob.glob(str(folder / "**" / "*.parquet"), recursive=True))


def test_a_checkpoint_publishes_the_open_recording_files_and_a_restored_run_adds_to_them(tmp_path):
    rec = tmp_path / "rec"
    config = (marl.PPOConfig().environment("CartPole-v1").env_runners(rollout_fragment_length=100)
              .training(train_batch_size=200, minibatch_size=100, num_epochs=1).offline_data(output=str(rec)))
    algo = config.build()
    try:
        algo.train()
        r = algo.train()
        assert published_rows(rec) == 0  # still in the open (hidden) file: a killed process would lose it
        checkpoint = algo.save(tmp_path / "ckpt")
        saved = r["counters/offline/rows_written"]
        assert saved > 0 and published_rows(rec) == saved  # every row up to the checkpoint
        r = algo.train()  # recording goes on, into new files
    finally:
        algo.stop()
    first_run, per_iteration = r["counters/offline/rows_written"], r["counters/offline/rows_written"] - saved
    assert published_rows(rec) == first_run
    restored = marl.Algorithm.from_checkpoint(checkpoint)
    try:
        r = restored.train()
    finally:
        restored.stop()
    assert r["counters/offline/rows_written"] == saved + per_iteration  # counted on from the checkpoint
    assert published_rows(rec) == first_run + per_iteration  # both runs' rows: nothing lost or overwritten


def epochs_of(stream, n):
    out = []
    for _ in range(n):
        batch, _ = next(stream)
        out.append((stream.epochs, batch["p"][sb.EPS_ID].copy(), batch["p"][sb.T].copy()))
    return out


def test_a_restored_reader_continues_its_pass(tmp_path, ray_session):
    writer = OfflineWriter(tmp_path, ["agent_0"])
    for eps in range(4):
        writer.write({"p": tiny_batch(25, eps=eps)}, 1)
    writer.close()

    def stream():
        return OfflineStream(str(tmp_path), PolicyMapping(None, ["p"]), ["p"], batch_rows=16, cache_mb=64, seed=3)

    a = stream()  # 100 rows: 7 batches an epoch
    # what a stream without a restored state reads first: its first epoch (read from `a`, not from one more stream:
    # each stream's first epoch is a Ray Data execution, seconds on a loaded machine)
    assert [e for e, _, _ in epochs_of(a, 9)] == [1] * 7 + [2] * 2
    state = a.get_state()
    assert state["epochs"] == 2 and state["batches"] == 2
    ahead = epochs_of(a, 7)  # the rest of epoch 2, then epoch 3
    a.close()
    b = stream()
    b.set_state(state)
    again = epochs_of(b, 7)
    b.close()
    assert [e for e, _, _ in again] == [e for e, _, _ in ahead] == [2] * 5 + [3] * 2
    for (_, eps_a, t_a), (_, eps_b, t_b) in zip(ahead, again):
        np.testing.assert_array_equal(eps_a, eps_b)
        np.testing.assert_array_equal(t_a, t_b)
