"""Training targets on the batch's own device: a batched runner's fragment stays torch from the runner to the learner.

GAE, returns-to-go, V-trace and standardised advantages computed on torch columns equal the NumPy reference (the
dict path's, unchanged) on batches of many trajectory pieces ending in terminations, truncations with bootstrap
values and fragment cuts; the batched path samples, concatenates and trains with `torch.Tensor.numpy` unavailable.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import marl
from marl.algorithms.pg.loss import returns_to_go
from marl.connectors.learner import compute_gae, reverse_scan, standardize, vtrace
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.data.records import SampledBatch
from marl.learners import Learner
from marl.runners.batched_runner import BatchedEnvRunner

TERMINATED, TRUNCATED, CUT = 0, 1, 2


def pieces_batch(seed: int, pieces: int, longest: int = 40) -> SampleBatch:
    """`pieces` trajectory pieces end to end, each ending in a termination, a truncation or a cut (the last two
    with a bootstrap value), as NumPy columns."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, longest + 1, size=pieces)
    n = int(lengths.sum())
    ends = np.cumsum(lengths) - 1
    how = rng.integers(0, 3, size=pieces)
    terminated, truncated, segment_end = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    terminated[ends[how == TERMINATED]] = True
    truncated[ends[how == TRUNCATED]] = True
    segment_end[ends] = True
    bootstrap = np.zeros(n, np.float32)
    bootstrap[ends[how != TERMINATED]] = rng.normal(size=int((how != TERMINATED).sum()))
    assert {TERMINATED, TRUNCATED, CUT} <= set(how.tolist())
    return SampleBatch({
        sb.REWARDS: rng.normal(size=n).astype(np.float32),
        sb.VF_PREDS: rng.normal(size=n).astype(np.float32),
        sb.BOOTSTRAP_VALUE: bootstrap,
        sb.TERMINATEDS: terminated,
        sb.TRUNCATEDS: truncated,
        sb.SEGMENT_END: segment_end,
        sb.ACTION_LOGP: rng.normal(-1.0, 0.3, size=n).astype(np.float32),
    })


def as_tensors(batch: SampleBatch) -> SampleBatch:
    return SampleBatch({k: torch.from_numpy(v.copy()) for k, v in batch.items()})


def assert_close(tensor: torch.Tensor, reference: np.ndarray) -> None:
    assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.float32
    np.testing.assert_allclose(tensor.numpy(), reference, rtol=1e-6, atol=1e-6)


# 300 pieces: the NumPy reference scans them in a Python loop; 2,000 short ones: in its vectorised scan of chains
@pytest.mark.parametrize("pieces, longest", [(300, 40), (2_000, 12)])
@pytest.mark.parametrize("seed", [0, 1])
def test_gae_and_standardised_advantages_on_tensors_equal_numpys(pieces, longest, seed):
    reference = compute_gae(pieces_batch(seed, pieces, longest), gamma=0.99, lambda_=0.95)
    on_tensors = compute_gae(as_tensors(pieces_batch(seed, pieces, longest)), gamma=0.99, lambda_=0.95)
    assert_close(on_tensors[sb.ADVANTAGES], reference[sb.ADVANTAGES])
    assert_close(on_tensors[sb.VALUE_TARGETS], reference[sb.VALUE_TARGETS])
    assert_close(standardize(on_tensors[sb.ADVANTAGES]), standardize(reference[sb.ADVANTAGES]))
    # a piece's last advantage: r + gamma * bootstrap - V (no bootstrap after a termination)
    end = reference[sb.SEGMENT_END]
    last = reference[sb.REWARDS] + 0.99 * np.where(reference[sb.TERMINATEDS], 0.0, reference[sb.BOOTSTRAP_VALUE]) \
        - reference[sb.VF_PREDS]
    np.testing.assert_allclose(on_tensors[sb.ADVANTAGES].numpy()[end], last[end], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pieces, longest", [(300, 40), (2_000, 12)])
def test_returns_to_go_on_tensors_equal_numpys(pieces, longest):
    reference = returns_to_go(pieces_batch(2, pieces, longest), gamma=0.9)
    on_tensors = returns_to_go(as_tensors(pieces_batch(2, pieces, longest)), gamma=0.9)
    assert_close(on_tensors[sb.ADVANTAGES], reference[sb.ADVANTAGES])


def test_vtrace_on_tensors_equals_numpys():
    batch = pieces_batch(3, 500)
    target_logp = batch[sb.ACTION_LOGP] + np.random.default_rng(4).normal(0.0, 0.5, len(batch)).astype(np.float32)
    names = (sb.ACTION_LOGP, None, sb.REWARDS, sb.VF_PREDS, sb.BOOTSTRAP_VALUE, sb.TERMINATEDS, sb.SEGMENT_END)
    arrays = [target_logp if k is None else batch[k] for k in names]
    options = dict(gamma=0.99, rho_bar=1.0, c_bar=0.9, pg_rho_bar=1.0, lambda_=0.95)
    vs, adv = vtrace(*arrays, **options)
    vs_t, adv_t = vtrace(*[torch.from_numpy(a.copy()) for a in arrays], **options)
    assert_close(vs_t, vs)
    assert_close(adv_t, adv)


def test_the_scan_of_a_tensor_equals_the_loop_to_the_last_bit():
    batch = pieces_batch(5, 3_000, longest=20)
    deltas, carry = batch[sb.REWARDS], (0.95 * ~batch[sb.SEGMENT_END]).astype(np.float32)
    expected = np.empty(len(deltas), np.float32)
    running = 0.0
    for i in range(len(deltas) - 1, -1, -1):
        running = float(deltas[i]) + float(carry[i]) * running
        expected[i] = running
    np.testing.assert_array_equal(reverse_scan(torch.from_numpy(deltas), torch.from_numpy(carry)).numpy(), expected)
    np.testing.assert_array_equal(reverse_scan(deltas, carry), expected)


def test_row_operations_keep_tensor_columns_and_their_tables():
    def part(offset: int) -> SampleBatch:
        return SampleBatch({sb.OBS: torch.arange(offset, offset + 4.0), sb.table_index(sb.STATE): torch.tensor([0, 0, 1, 1])},
                           {sb.STATE: torch.tensor([[offset], [offset + 1.0]])})
    joined = SampleBatch.concat([part(0), part(10)])
    assert isinstance(joined[sb.OBS], torch.Tensor) and isinstance(joined.tables[sb.STATE], torch.Tensor)
    assert joined.join(sb.STATE).squeeze(1).tolist() == [0, 0, 1, 1, 10, 10, 11, 11]
    taken = joined.take(np.array([5, 0]))
    assert taken[sb.OBS].tolist() == [11.0, 0.0] and taken.join(sb.STATE).squeeze(1).tolist() == [10, 0]
    copied = joined.copy()
    copied[sb.OBS][0] = -1.0
    assert joined[sb.OBS][0] == 0.0
    assert joined.size_bytes() == 8 * 4 + 8 * 8 + 4 * 4
    as_numpy = joined.to_numpy()
    assert isinstance(as_numpy[sb.OBS], np.ndarray) and as_numpy.join(sb.STATE).squeeze(1).tolist() == [0, 0, 1, 1, 10, 10, 11, 11]


def numpy_refused(self, *args, **kwargs):
    raise AssertionError("a batched fragment was converted to NumPy on its way to the learner")


@pytest.mark.parametrize("algo", ["PPO", "MAPPO"])
def test_the_batched_path_samples_and_trains_with_no_numpy_conversion(monkeypatch, algo):
    """Two fragments of VMAS worlds (torch acting, as on a GPU), concatenated as the concat operator does, then one
    learner update (GAE, standardised advantages, minibatches; MAPPO's state table): none converts a tensor."""
    pytest.importorskip("vmas")
    worlds, steps, agents = 4, 10, 3
    cfg = (getattr(marl, f"{algo}Config")()
           .environment("vmas.balance", env_config={"max_steps": 7, "n_agents": agents})
           .env_runners(num_envs_per_env_runner=worlds, rollout_fragment_length=steps, numpy_acting=False)
           .training(train_batch_size=2 * worlds * steps * agents, minibatch_size=worlds * agents, num_epochs=2)
           .debugging(seed=0))
    cfg.validate()
    runner = BatchedEnvRunner(cfg, 0)
    learner = Learner(cfg, runner.specs)
    try:
        monkeypatch.setattr(torch.Tensor, "numpy", numpy_refused)
        first = runner.sample()
        rows = first.batch["default_policy"]
        assert all(isinstance(v, torch.Tensor) for v in rows.columns.values())
        kept = rows.copy()
        record = SampledBatch.concat([first, runner.sample()])
        for name, column in kept.columns.items():  # the next fragment overwrote the runner's tensors, not these rows
            assert torch.equal(rows[name], column), name
        results = learner.update(record.batch)
        monkeypatch.undo()
    finally:
        runner.stop()
    stats = results["default_policy"]
    assert stats["agent_steps_trained"] == 2 * worlds * steps * agents and stats["num_sgd_steps"] == 2 * 2 * steps
    assert np.isfinite(stats["policy_loss"]) and np.isfinite(stats["vf_loss"])


def host_weights_refused(self, *args, **kwargs):
    raise AssertionError("an in-process weight sync went through NumPy")


@pytest.mark.parametrize("batched", [True, False])
def test_an_in_process_weight_sync_hands_the_learners_tensors_over(monkeypatch, batched):
    """In one process the learner's weights reach the runner as tensor copies where the learner keeps them (on a GPU:
    no device -> host -> device trip each sync): `RLModule.get_state` (NumPy, for Ray and checkpoints) refused while
    PPO trains, on the batched and the dict path. The runner then acts with the learner's weights, as copies."""
    pytest.importorskip("vmas")
    cfg = (marl.PPOConfig()
           .environment("vmas.balance", env_config={"max_steps": 7, "n_agents": 3})
           .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=10, batched=batched)
           .training(train_batch_size=120, minibatch_size=60, num_epochs=1)
           .debugging(seed=0))
    algo = cfg.build()
    try:
        monkeypatch.setattr(marl.RLModule, "get_state", host_weights_refused)
        results = [algo.train() for _ in range(2)]
        monkeypatch.undo()
        assert results[-1]["counters/weights_syncs"] == 2
        learner = algo.learners.local.module["default_policy"].state_dict()
        runner = algo.runners.local.module["default_policy"].state_dict()
        for name, value in learner.items():
            assert torch.equal(runner[name], value), name
            assert runner[name].data_ptr() != value.data_ptr(), name  # a copy: the next update does not reach it
    finally:
        algo.stop()
