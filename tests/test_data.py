"""Tests for marl.data: SampleBatch, MultiAgentBatch and Episode."""

from __future__ import annotations

import numpy as np
import pytest

from marl.data import Episode, MultiAgentBatch, SampleBatch


def _batch(n: int, start: int = 0) -> SampleBatch:
    a = np.arange(start, start + n, dtype=np.int64)
    return SampleBatch({"a": a, "b": a * 2, "obs": np.stack([a, -a], axis=1).astype(np.float32)})


# -- SampleBatch construction --------------------------------------------------


def test_columns_of_unequal_length_rejected():
    with pytest.raises(ValueError, match="different lengths"):
        SampleBatch({"a": np.zeros(3), "b": np.zeros(4)})


def test_scalar_column_rejected():
    with pytest.raises(ValueError, match="scalar"):
        SampleBatch({"a": np.float32(1.0)})


def test_setitem_with_wrong_length_rejected_and_right_length_accepted():
    b = _batch(5)
    with pytest.raises(ValueError, match="length 4"):
        b["c"] = np.zeros(4)
    b["c"] = np.ones(5)
    assert "c" in b and len(b) == 5


def test_len_and_empty():
    assert len(_batch(7)) == 7
    assert len(SampleBatch()) == 0


# -- concat ---------------------------------------------------------------------


def test_concat_values_and_order():
    b1, b2, b3 = _batch(3, 0), _batch(2, 10), _batch(4, 100)
    out = SampleBatch.concat([b1, b2, b3])
    assert len(out) == 9
    np.testing.assert_array_equal(out["a"], [0, 1, 2, 10, 11, 100, 101, 102, 103])
    np.testing.assert_array_equal(out["b"], out["a"] * 2)
    np.testing.assert_array_equal(out["obs"][:, 1], -out["a"])
    assert out["obs"].shape == (9, 2)


def test_concat_skips_empty_batches():
    out = SampleBatch.concat([SampleBatch(), _batch(2), SampleBatch(), _batch(1, 5)])
    np.testing.assert_array_equal(out["a"], [0, 1, 5])


def test_concat_mismatched_columns_raises():
    b1 = _batch(2)
    b2 = SampleBatch({"a": np.arange(2), "c": np.arange(2)})
    with pytest.raises(ValueError, match="different columns"):
        SampleBatch.concat([b1, b2])


# -- row operations ---------------------------------------------------------------


def test_slice():
    s = _batch(10).slice(3, 7)
    assert len(s) == 4
    np.testing.assert_array_equal(s["a"], [3, 4, 5, 6])
    np.testing.assert_array_equal(s["obs"][:, 1], [-3, -4, -5, -6])


def test_take():
    t = _batch(10).take(np.array([9, 0, 4, 4]))
    np.testing.assert_array_equal(t["a"], [9, 0, 4, 4])
    np.testing.assert_array_equal(t["b"], [18, 0, 8, 8])


def test_copy_is_independent():
    b = _batch(4)
    c = b.copy()
    c["a"][0] = 99
    assert b["a"][0] == 0


def test_shuffle_keeps_rows_aligned_and_is_a_permutation():
    b = _batch(50)
    s = b.shuffle(np.random.default_rng(0))
    assert len(s) == 50
    np.testing.assert_array_equal(s["b"], s["a"] * 2)
    np.testing.assert_array_equal(s["obs"][:, 0], s["a"])
    np.testing.assert_array_equal(np.sort(s["a"]), b["a"])
    assert not np.array_equal(s["a"], b["a"])  # actually reordered
    # original untouched
    np.testing.assert_array_equal(b["a"], np.arange(50))


def test_shuffle_is_reproducible_with_seeded_rng():
    b = _batch(20)
    s1 = b.shuffle(np.random.default_rng(3))
    s2 = b.shuffle(np.random.default_rng(3))
    np.testing.assert_array_equal(s1["a"], s2["a"])


@pytest.mark.parametrize("shuffle", [False, True])
def test_minibatches_cover_every_row_once(shuffle):
    b = _batch(23)
    rng = np.random.default_rng(1) if shuffle else None
    mbs = list(b.minibatches(5, rng=rng))
    assert [len(m) for m in mbs] == [5, 5, 5, 5, 3]
    seen = np.concatenate([m["a"] for m in mbs])
    np.testing.assert_array_equal(np.sort(seen), np.arange(23))
    for m in mbs:
        np.testing.assert_array_equal(m["b"], m["a"] * 2)
    if not shuffle:
        np.testing.assert_array_equal(seen, np.arange(23))
    else:
        assert not np.array_equal(seen, np.arange(23))


def test_minibatches_drop_last():
    b = _batch(23)
    mbs = list(b.minibatches(5, rng=np.random.default_rng(0), drop_last=True))
    assert [len(m) for m in mbs] == [5, 5, 5, 5]
    seen = np.concatenate([m["a"] for m in mbs])
    assert len(np.unique(seen)) == 20


def test_minibatches_drop_last_exact_multiple_keeps_all():
    mbs = list(_batch(20).minibatches(5, drop_last=True))
    assert [len(m) for m in mbs] == [5, 5, 5, 5]


def test_minibatches_bad_size():
    with pytest.raises(ValueError, match="positive"):
        list(_batch(4).minibatches(0))


# -- summary ----------------------------------------------------------------------


def test_summary_names_columns_with_dtype_shape_and_stats():
    b = SampleBatch(
        {
            "rewards": np.array([1.0, 2.0, 6.0], dtype=np.float32),
            "obs": np.array([[-3, 1], [0, 2], [5, 4]], dtype=np.int32),
        }
    )
    text = b.summary()
    lines = {line.split(":")[0].strip().strip("'"): line for line in text.splitlines() if ":" in line}
    assert set(lines) == {"rewards", "obs"}
    r = lines["rewards"]
    assert "float32" in r and "(3,)" in r
    assert "min=1" in r and "max=6" in r and "mean=3" in r
    o = lines["obs"]
    assert "int32" in o and "(3, 2)" in o
    assert "min=-3" in o and "max=5" in o and "mean=1.5" in o


def test_summary_non_numeric_and_empty_columns():
    text = SampleBatch({"s": np.array(["x", "y"])}).summary()
    assert "'s'" in text and "head=" in text
    empty = SampleBatch({"e": np.zeros((0, 3), dtype=np.float32)}).summary()
    assert "empty" in empty and "(0, 3)" in empty


# -- MultiAgentBatch --------------------------------------------------------------


def test_multi_agent_batch_counts_env_and_agent_steps_separately():
    # 4 env steps of an env with 3 agents on two policies: 12 agent steps.
    mab = MultiAgentBatch({"predator": _batch(8), "prey": _batch(4)}, env_steps=4)
    assert mab.env_steps == 4
    assert mab.agent_steps() == 12
    assert mab.agent_steps_per_policy() == {"predator": 8, "prey": 4}
    assert "prey" in mab and "nobody" not in mab
    assert len(mab["predator"]) == 8


def test_multi_agent_batch_concat_single_policy_stays_multi_agent():
    b1 = MultiAgentBatch({"default_policy": _batch(3)}, env_steps=3)
    b2 = MultiAgentBatch({"default_policy": _batch(2, 10)}, env_steps=2)
    out = MultiAgentBatch.concat([b1, b2])
    assert isinstance(out, MultiAgentBatch)
    assert list(out.policy_batches) == ["default_policy"]
    assert out.env_steps == 5
    assert out.agent_steps() == 5
    np.testing.assert_array_equal(out["default_policy"]["a"], [0, 1, 2, 10, 11])


def test_multi_agent_batch_concat_policies_and_info():
    from marl.workflow import SampledBatch

    b1 = SampledBatch(MultiAgentBatch({"p": _batch(2)}, env_steps=1), weights_versions=[3], connector_deltas=["d1"])
    b2 = SampledBatch(MultiAgentBatch({"q": _batch(3), "p": _batch(1, 7)}, env_steps=2), weights_versions=[4])
    record = SampledBatch.concat([b1, b2])
    out = record.batch
    assert list(out.policy_batches) == ["p", "q"]
    np.testing.assert_array_equal(out["p"]["a"], [0, 1, 7])
    assert len(out["q"]) == 3
    assert out.env_steps == 3
    assert out.agent_steps() == 6
    assert (record.weights_versions, record.connector_deltas) == ([3, 4], ["d1"])
    # the inputs' metadata lists are not extended in place
    assert b1.weights_versions == [3]


def test_multi_agent_batch_summary_and_size():
    mab = MultiAgentBatch({"p": _batch(2)}, env_steps=2)
    assert "env_steps=2" in mab.summary() and "'p'" in mab.summary()
    assert mab.size_bytes() == _batch(2).size_bytes() > 0


# -- Episode ----------------------------------------------------------------------


def test_episode_policy_returns_sums_per_policy():
    ep = Episode(id=1, env_index=0)
    ep.bind("adversary_0", "predator")
    ep.bind("adversary_1", "predator")
    ep.bind("agent_0", "prey")
    ep.agent_returns["adversary_0"] += 1.5
    ep.agent_returns["adversary_1"] += 2.0
    ep.agent_returns["agent_0"] -= 3.0
    assert ep.policy_returns() == pytest.approx({"predator": 3.5, "prey": -3.0})
    assert ep.total_return == pytest.approx(0.5)
    m = ep.metrics()
    assert m["policy_returns"] == pytest.approx({"predator": 3.5, "prey": -3.0})
    assert m["policy_of"] == {"adversary_0": "predator", "adversary_1": "predator", "agent_0": "prey"}


def test_episode_bind_keeps_existing_return():
    ep = Episode(id=0, env_index=0)
    ep.agent_returns["a"] = 2.0
    ep.bind("a", "p")
    assert ep.agent_returns["a"] == 2.0
    assert ep.agent_steps["a"] == 0
