"""Tests for marl.connectors: GAE, standardisation, observation filter/preprocessor, action adapter."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from marl.connectors import (
    ActionAdapter, ClipActions, Flatten, MeanStdFilter, ModuleToEnvPipeline, UnsquashActions, compute_gae, standardize,
)
from marl.data import SampleBatch
from marl.data import sample_batch as sb

GAMMA, LAM = 0.9, 0.8


def reference_gae(rewards, values, terminated, segment_end, bootstrap, gamma, lam):
    """Straightforward per-piece GAE: the definition, one piece at a time."""
    n = len(rewards)
    adv = np.zeros(n, np.float64)
    start = 0
    for end in range(n):
        if not segment_end[end]:
            continue
        gae = 0.0
        for i in range(end, start - 1, -1):
            if i == end:
                next_value = 0.0 if terminated[i] else bootstrap[i]
            else:
                next_value = values[i + 1]
            nonterminal = 0.0 if terminated[i] else 1.0
            delta = rewards[i] + gamma * nonterminal * next_value - values[i]
            gae = delta + (gamma * lam * nonterminal * gae if i != end else 0.0)
            adv[i] = gae
        start = end + 1
    assert start == n, "last row must end a piece"
    return adv, adv + np.asarray(values, np.float64)


def make_batch(rewards, values, terminated, segment_end, bootstrap):
    n = len(rewards)
    return SampleBatch(
        {
            sb.REWARDS: np.asarray(rewards, np.float32),
            sb.VF_PREDS: np.asarray(values, np.float32),
            sb.TERMINATEDS: np.asarray(terminated, bool),
            sb.TRUNCATEDS: np.zeros(n, bool),
            sb.SEGMENT_END: np.asarray(segment_end, bool),
            sb.BOOTSTRAP_VALUE: np.asarray(bootstrap, np.float32),
        }
    )


def check_against_reference(cols):
    batch = compute_gae(make_batch(**cols), GAMMA, LAM)
    adv, targets = reference_gae(
        cols["rewards"], cols["values"], cols["terminated"], cols["segment_end"], cols["bootstrap"], GAMMA, LAM
    )
    np.testing.assert_allclose(batch[sb.ADVANTAGES], adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batch[sb.VALUE_TARGETS], targets, rtol=1e-5, atol=1e-5)
    return batch


def test_gae_terminated_episode_no_bootstrap():
    cols = dict(
        rewards=[1.0, 0.5, -1.0, 2.0],
        values=[0.3, -0.2, 0.7, 1.1],
        terminated=[0, 0, 0, 1],
        segment_end=[0, 0, 0, 1],
        bootstrap=[0.0, 0.0, 0.0, 123.0],  # must be ignored: the episode terminated
    )
    batch = check_against_reference(cols)
    # last step of a terminated episode: advantage = r - V, target = r
    assert batch[sb.ADVANTAGES][-1] == pytest.approx(2.0 - 1.1)
    assert batch[sb.VALUE_TARGETS][-1] == pytest.approx(2.0)


def test_gae_truncated_piece_bootstraps():
    cols = dict(
        rewards=[1.0, 0.0, 0.5],
        values=[0.2, 0.4, -0.3],
        terminated=[0, 0, 0],
        segment_end=[0, 0, 1],
        bootstrap=[0.0, 0.0, 2.5],
    )
    batch = check_against_reference(cols)
    assert batch[sb.VALUE_TARGETS][-1] == pytest.approx(0.5 + GAMMA * 2.5)
    # and the bootstrap value flows into earlier rows
    cols2 = dict(cols, bootstrap=[0.0, 0.0, 0.0])
    batch2 = compute_gae(make_batch(**cols2), GAMMA, LAM)
    assert batch[sb.ADVANTAGES][0] - batch2[sb.ADVANTAGES][0] == pytest.approx((GAMMA * LAM) ** 2 * GAMMA * 2.5, rel=1e-5)


def _two_pieces(piece2_rewards):
    return dict(
        rewards=[1.0, -0.5, 0.25] + list(piece2_rewards),
        values=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        terminated=[0, 0, 0, 0, 0, 1],
        segment_end=[0, 0, 1, 0, 0, 1],
        bootstrap=[0.0, 0.0, 0.7, 0.0, 0.0, 0.0],
    )


def test_gae_pieces_back_to_back_are_independent():
    b1 = check_against_reference(_two_pieces([0.0, 1.0, 2.0]))
    b2 = check_against_reference(_two_pieces([50.0, -30.0, 9.0]))
    np.testing.assert_allclose(b1[sb.ADVANTAGES][:3], b2[sb.ADVANTAGES][:3], rtol=1e-6)
    np.testing.assert_allclose(b1[sb.VALUE_TARGETS][:3], b2[sb.VALUE_TARGETS][:3], rtol=1e-6)
    assert not np.allclose(b1[sb.ADVANTAGES][3:], b2[sb.ADVANTAGES][3:])
    # piece 1 bootstraps from its own bootstrap value, not from piece 2's first value
    assert b1[sb.VALUE_TARGETS][2] == pytest.approx(0.25 + GAMMA * 0.7)


def test_gae_random_mixed_pieces_against_reference():
    rng = np.random.default_rng(0)
    n = 40
    seg_end = rng.random(n) < 0.2
    seg_end[-1] = True
    term = seg_end & (rng.random(n) < 0.5)
    cols = dict(
        rewards=rng.normal(size=n).tolist(),
        values=rng.normal(size=n).tolist(),
        terminated=term.tolist(),
        segment_end=seg_end.tolist(),
        bootstrap=np.where(seg_end & ~term, rng.normal(size=n), 0.0).tolist(),
    )
    check_against_reference(cols)


def test_standardize():
    x = np.random.default_rng(0).normal(5.0, 3.0, size=1000)
    y = standardize(x)
    assert y.dtype == np.float32
    assert abs(float(y.mean())) < 1e-5
    assert float(y.std()) == pytest.approx(1.0, abs=1e-4)
    # order preserved
    np.testing.assert_array_equal(np.argsort(y), np.argsort(x))
    # constant input does not blow up
    assert np.all(np.isfinite(standardize(np.ones(4))))


# -- MeanStdFilter --------------------------------------------------------------


def test_mean_std_filter_merging_halves_equals_whole():
    rng = np.random.default_rng(0)
    data = rng.normal([1.0, -3.0, 10.0], [0.5, 2.0, 4.0], size=(600, 3))
    f1, f2 = MeanStdFilter(3), MeanStdFilter(3)
    for chunk in np.array_split(data[:250], 7):  # several updates per filter
        f1(chunk)
    for chunk in np.array_split(data[250:], 5):
        f2(chunk)
    d1, d2 = f1.pop_delta(), f2.pop_delta()
    assert d1["count"] == 250 and d2["count"] == 350
    merged = MeanStdFilter.merge(d1, d2)
    assert merged["count"] == 600
    np.testing.assert_allclose(merged["mean"], data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(merged["m2"] / merged["count"], data.var(0), rtol=1e-10)
    # merging with empty stats is the identity
    same = MeanStdFilter.merge(MeanStdFilter.empty_stats(3), merged)
    np.testing.assert_allclose(same["mean"], merged["mean"])
    np.testing.assert_allclose(same["m2"], merged["m2"])


def test_mean_std_filter_pop_delta_moves_into_central():
    f = MeanStdFilter(2)
    f(np.ones((4, 2)))
    delta = f.pop_delta()
    assert delta["count"] == 4
    assert f.delta["count"] == 0
    assert f.get_state()["count"] == 4


def test_mean_std_filter_normalises():
    rng = np.random.default_rng(1)
    f = MeanStdFilter(2)
    for _ in range(20):
        f(rng.normal([5.0, -2.0], [3.0, 0.1], size=(100, 2)))
    x = rng.normal([5.0, -2.0], [3.0, 0.1], size=(5000, 2))
    y = f(x, update=False)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.mean(0), [0.0, 0.0], atol=0.05)
    np.testing.assert_allclose(y.std(0), [1.0, 1.0], atol=0.05)
    # update=False left the statistics alone
    assert f.delta["count"] == 2000


def test_mean_std_filter_clips():
    f = MeanStdFilter(1, clip=3.0)
    f(np.array([[-1.0], [1.0]] * 10))
    y = f(np.array([[100.0], [-100.0]]), update=False)
    np.testing.assert_allclose(y[:, 0], [3.0, -3.0])


def test_mean_std_filter_passthrough_before_two_samples():
    f = MeanStdFilter(2)
    x = np.array([[3.0, 4.0]])
    np.testing.assert_array_equal(f(x), x)


def test_mean_std_filter_set_state_normalises_identically():
    rng = np.random.default_rng(2)
    f = MeanStdFilter(3)
    f(rng.normal(2.0, 3.0, size=(300, 3)))
    f.pop_delta()
    g = MeanStdFilter(3)
    g.set_state(f.get_state())
    x = rng.normal(size=(10, 3))
    np.testing.assert_allclose(g(x, update=False), f(x, update=False))
    assert not np.allclose(g(x, update=False), x)
    # g holds a copy: further updates to f do not leak into g
    f(rng.normal(50.0, 1.0, size=(300, 3)))
    f.pop_delta()
    assert not np.allclose(g(x, update=False), f(x, update=False))


# -- the env->module pipeline's first steps: Flatten, then the mean/std filter ---------


class ObservationPreprocessor:
    """Flatten, then optionally the mean/std filter: what the default env->module pipeline does."""

    def __init__(self, space, normalize: bool = False):
        self.flatten = Flatten(space)
        self.dim = self.flatten.dim
        self.filter = MeanStdFilter(self.dim) if normalize else None

    def __call__(self, raw, update_filter: bool = True):
        obs, mask = self.flatten(raw)
        return (obs if self.filter is None else self.filter(obs, update=update_filter)), mask


def test_preprocessor_box():
    space = gym.spaces.Box(-1, 1, (2, 3), np.float64)
    p = ObservationPreprocessor(space)
    raw = [np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3)]
    obs, mask = p(raw)
    assert mask is None
    assert obs.dtype == np.float32 and obs.shape == (2, 6)
    np.testing.assert_array_equal(obs[0], np.arange(6.0))
    np.testing.assert_array_equal(obs[1], -np.arange(6.0))


def test_preprocessor_discrete_one_hot_with_start():
    p = ObservationPreprocessor(gym.spaces.Discrete(4, start=2))
    obs, mask = p([2, 5, 3])
    assert mask is None
    np.testing.assert_array_equal(obs, [[1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0]])
    assert obs.dtype == np.float32


def test_preprocessor_masked_dict_splits_mask():
    space = gym.spaces.Dict(
        {"observation": gym.spaces.Box(0, 1, (4,), np.float32), "action_mask": gym.spaces.MultiBinary(3)}
    )
    p = ObservationPreprocessor(space)
    assert p.dim == 4
    raw = [
        {"observation": np.array([0.1, 0.2, 0.3, 0.4], np.float32), "action_mask": np.array([1, 0, 1], np.int8)},
        {"observation": np.array([0.5, 0.6, 0.7, 0.8], np.float32), "action_mask": np.array([0, 1, 0], np.int8)},
    ]
    obs, mask = p(raw)
    assert obs.shape == (2, 4)
    np.testing.assert_allclose(obs[1], [0.5, 0.6, 0.7, 0.8])
    assert mask.dtype == np.float32
    np.testing.assert_array_equal(mask, [[1, 0, 1], [0, 1, 0]])


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32))),
        gym.spaces.Dict({"pos": gym.spaces.Box(-5, 5, (2,), np.float32), "kind": gym.spaces.Discrete(4)}),
    ],
    ids=["tuple", "dict"],
)
def test_preprocessor_generic_flatten(space):
    space.seed(0)
    p = ObservationPreprocessor(space)
    raw = [space.sample() for _ in range(5)]
    obs, mask = p(raw)
    assert mask is None
    assert obs.shape == (5, gym.spaces.flatdim(space)) and obs.dtype == np.float32
    for row, o in zip(obs, raw):
        np.testing.assert_allclose(row, gym.spaces.flatten(space, o).astype(np.float32))


def test_preprocessor_with_normalize_filters_and_respects_update_flag():
    p = ObservationPreprocessor(gym.spaces.Box(-10, 10, (2,), np.float32), normalize=True)
    rng = np.random.default_rng(0)
    p(list(rng.normal(3.0, 2.0, size=(500, 2))))
    assert p.filter.delta["count"] == 500
    obs, _ = p([np.array([3.0, 3.0])], update_filter=False)
    assert p.filter.delta["count"] == 500
    np.testing.assert_allclose(obs[0], [0.0, 0.0], atol=0.2)


# -- the module->env pipeline: action pieces, then ActionAdapter ------------------------


def to_env(space, clip_actions: bool = True, unsquash_actions: bool = False):
    """The module->env pipeline `environment.clip_actions` / `unsquash_actions` make for a Box space."""
    pieces = {}
    if unsquash_actions:
        pieces["unsquash_actions"] = UnsquashActions()
    elif clip_actions:
        pieces["clip_actions"] = ClipActions()
    pipeline = ModuleToEnvPipeline(pieces, space)
    return lambda actions: pipeline(actions, None)


def test_action_adapter_discrete_python_ints_with_start():
    out = ActionAdapter(gym.spaces.Discrete(3, start=-1))(np.array([0, 2, 1]))
    assert out == [-1, 1, 0]
    assert all(type(a) is int for a in out)
    out0 = ActionAdapter(gym.spaces.Discrete(3))(np.array([2]))
    assert out0 == [2] and type(out0[0]) is int


def test_action_adapter_box_clip():
    space = gym.spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([1.0, 5.0], np.float32))
    out = to_env(space)(np.array([[-3.0, 2.0], [0.5, 9.0]]))
    assert len(out) == 2
    np.testing.assert_allclose(out[0], [-1.0, 2.0])
    np.testing.assert_allclose(out[1], [0.5, 5.0])
    assert out[0].dtype == np.float32
    raw = to_env(space, clip_actions=False)(np.array([[-3.0, 9.0]]))
    np.testing.assert_allclose(raw[0], [-3.0, 9.0])


def test_action_adapter_box_unsquash():
    space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 10.0], np.float32))
    a = to_env(space, unsquash_actions=True)
    out = a(np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0], [5.0, -7.0]]))
    np.testing.assert_allclose(out[0], [-2.0, 0.0])  # -1 -> low
    np.testing.assert_allclose(out[1], [2.0, 10.0])  # 1 -> high
    np.testing.assert_allclose(out[2], [0.0, 5.0])  # 0 -> middle
    np.testing.assert_allclose(out[3], [2.0, 0.0])  # outside [-1, 1] clipped first


def test_action_adapter_box_reshapes_flat_actions():
    space = gym.spaces.Box(-1, 1, (2, 2), np.float32)
    out = ActionAdapter(space)(np.zeros((3, 4)))
    assert len(out) == 3 and out[0].shape == (2, 2)


def test_action_adapter_multi_discrete():
    space = gym.spaces.MultiDiscrete([3, 4], start=[1, -2])
    out = ActionAdapter(space)(np.array([[0, 0], [2, 3]]))
    assert len(out) == 2
    np.testing.assert_array_equal(out[0], [1, -2])
    np.testing.assert_array_equal(out[1], [3, 1])
    assert all(space.contains(np.asarray(o, dtype=space.dtype)) for o in out)


def test_action_adapter_unsupported_space():
    with pytest.raises(TypeError, match="unsupported action space"):
        ActionAdapter(gym.spaces.MultiBinary(2))
