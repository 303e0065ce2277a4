"""Replay: segment trees, uniform and prioritised buffers, n-step transitions."""

from __future__ import annotations

import numpy as np
import pytest

from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.replay import (
    DISCOUNTS,
    REPLAY_WEIGHTS,
    MinSegmentTree,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    SumSegmentTree,
    nstep_transitions,
)


def _rows(start: int, n: int) -> SampleBatch:
    ids = np.arange(start, start + n)
    return SampleBatch({"x": ids.astype(np.int64), "obs": np.stack([ids, -ids], 1).astype(np.float32)})


# -- segment trees --------------------------------------------------------------------


def test_sum_and_min_trees_match_brute_force():
    rng = np.random.default_rng(0)
    values = np.zeros(13)
    s, m = SumSegmentTree(13), MinSegmentTree(13)
    for _ in range(20):
        idx = rng.integers(0, 13, size=5)
        val = rng.random(5)
        s[idx], m[idx] = val, val
        for i, v in zip(idx, val):  # a loop's semantics: the last write wins
            values[i] = v
        assert s.reduce() == pytest.approx(values.sum())
        written = m[np.arange(13)]
        assert m.reduce() == pytest.approx(written[np.isfinite(written)].min())
    prefix = np.cumsum(values)
    mass = rng.random(200) * values.sum()
    expected = np.searchsorted(prefix, mass, side="right")
    np.testing.assert_array_equal(s.find_prefixsum_idx(mass), expected)


# -- uniform buffer -------------------------------------------------------------------


def test_ring_buffer_wraps_and_keeps_newest_rows():
    buf = ReplayBuffer(capacity=5, seed=0)
    buf.add(_rows(0, 3))
    assert len(buf) == 3
    idx = buf.add(_rows(3, 4))  # wraps: slots 3, 4, 0, 1
    np.testing.assert_array_equal(idx, [3, 4, 0, 1])
    assert len(buf) == 5 and buf.added == 7
    assert sorted(buf.columns["x"].tolist()) == [2, 3, 4, 5, 6]
    buf.add(_rows(100, 12))  # more than capacity: only the newest 5 fit
    assert sorted(buf.columns["x"].tolist()) == [107, 108, 109, 110, 111]
    batch, idx = buf.sample(64)
    assert len(batch) == 64 and set(batch["x"].tolist()) <= {107, 108, 109, 110, 111}
    np.testing.assert_array_equal(batch["obs"][:, 0], batch["x"])  # rows stay whole
    assert np.all(batch[REPLAY_WEIGHTS] == 1.0)


def test_buffer_rejects_mismatched_columns_and_empty_sampling():
    buf = ReplayBuffer(capacity=4)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1)
    buf.add(_rows(0, 2))
    with pytest.raises(ValueError, match="columns"):
        buf.add(SampleBatch({"x": np.zeros(2, np.int64)}))
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0)


def test_buffer_state_round_trip():
    buf = PrioritizedReplayBuffer(8, alpha=0.5, seed=1)
    buf.add(_rows(0, 6))
    buf.update_priorities(np.array([0, 1]), np.array([5.0, 0.1]))
    copy = PrioritizedReplayBuffer(8, alpha=0.5, seed=99)
    copy.set_state(buf.get_state())
    a, ia = buf.sample(32)
    b, ib = copy.sample(32)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(a["x"], b["x"])
    np.testing.assert_allclose(a[REPLAY_WEIGHTS], b[REPLAY_WEIGHTS])


# -- prioritised buffer -----------------------------------------------------------------


def test_prioritized_sampling_frequencies_follow_priorities_to_alpha():
    alpha = 0.7
    buf = PrioritizedReplayBuffer(capacity=8, alpha=alpha, beta=0.4, seed=0)
    buf.add(_rows(0, 8))
    priorities = np.arange(1, 9, dtype=np.float64)
    buf.update_priorities(np.arange(8), priorities)
    counts = np.zeros(8)
    draws = 0
    for _ in range(400):
        _, idx = buf.sample(512)
        counts += np.bincount(idx, minlength=8)
        draws += 512
    expected = priorities**alpha / (priorities**alpha).sum()
    observed = counts / draws
    # 204,800 draws: each frequency's standard error is below 0.001.
    np.testing.assert_allclose(observed, expected, atol=0.004)
    # and a uniform sampler would miss clearly: the extremes differ by 4x
    assert observed[7] / observed[0] == pytest.approx(8**alpha, rel=0.05)


def test_importance_weights_on_a_hand_checked_example():
    buf = PrioritizedReplayBuffer(capacity=3, alpha=1.0, beta=0.5, eps=0.0, seed=0)
    buf.add(_rows(0, 3))
    buf.update_priorities(np.arange(3), np.array([1.0, 2.0, 4.0]))
    # P = [1, 2, 4] / 7; w_i = (N P_i)^-beta / max_j (N P_j)^-beta = (P_i / P_min)^-0.5
    batch, idx = buf.sample(300)
    expected = {0: 1.0, 1: 2**-0.5, 2: 0.5}
    for i, w in zip(idx, batch[REPLAY_WEIGHTS]):
        assert w == pytest.approx(expected[int(i)], rel=1e-6)
    assert set(idx.tolist()) == {0, 1, 2}


def test_new_rows_get_max_priority_and_beta_anneals():
    buf = PrioritizedReplayBuffer(capacity=10, alpha=1.0, beta=0.4, beta_final=1.0, beta_annealing_steps=10, eps=0.0)
    buf.add(_rows(0, 2))
    buf.update_priorities(np.array([0, 1]), np.array([3.0, 0.5]))
    buf.add(_rows(2, 3))
    assert buf.sum_tree[np.array([2, 3, 4])].tolist() == [3.0, 3.0, 3.0]
    assert buf.beta == pytest.approx(0.4 + 0.5 * 0.6)
    buf.add(_rows(5, 5))
    assert buf.beta == pytest.approx(1.0)
    with pytest.raises(ValueError, match="non-finite"):
        buf.update_priorities(np.array([0]), np.array([np.nan]))


# -- n-step ----------------------------------------------------------------------------


def _trajectory():
    # Two pieces: rows 0-3 (terminates at row 2? no: at row 3), rows 4-6 cut by the fragment (no termination).
    obs = np.arange(7, dtype=np.float32)[:, None]
    return SampleBatch({
        sb.OBS: obs,
        sb.NEXT_OBS: obs + 0.5,
        sb.ACTIONS: np.zeros(7, np.int64),
        sb.REWARDS: np.array([1, 2, 3, 4, 10, 20, 30], np.float32),
        sb.TERMINATEDS: np.array([0, 0, 0, 1, 0, 0, 0], bool),
        sb.SEGMENT_END: np.array([0, 0, 0, 1, 0, 0, 1], bool),
        sb.AGENT_INDEX: np.zeros(7, np.int32),
    })


def test_nstep_returns_stop_at_terminations_and_piece_ends():
    g = 0.5
    t = nstep_transitions(_trajectory(), n=3, gamma=g, keep=(sb.AGENT_INDEX,))
    np.testing.assert_allclose(t[sb.REWARDS], [1 + g * 2 + g * g * 3, 2 + g * 3 + g * g * 4, 3 + g * 4, 4,
                                               10 + g * 20 + g * g * 30, 20 + g * 30, 30])
    np.testing.assert_allclose(t[DISCOUNTS], [g**3, g**3, g**2, g, g**3, g**2, g])
    np.testing.assert_array_equal(t[sb.TERMINATEDS], [0, 1, 1, 1, 0, 0, 0])
    # bootstrap states: the next_obs of the last row summed
    np.testing.assert_allclose(t[sb.NEXT_OBS][:, 0], [2.5, 3.5, 3.5, 3.5, 6.5, 6.5, 6.5])
    assert sb.AGENT_INDEX in t


def test_one_step_transitions_are_the_rows():
    b = _trajectory()
    t = nstep_transitions(b, n=1, gamma=0.9)
    np.testing.assert_allclose(t[sb.REWARDS], b[sb.REWARDS])
    np.testing.assert_allclose(t[sb.NEXT_OBS], b[sb.NEXT_OBS])
    np.testing.assert_allclose(t[DISCOUNTS], 0.9)
