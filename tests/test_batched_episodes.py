"""EpisodeCounters: a whole fragment's bookkeeping at once (`after_fragment`, the compiled rollout's) gives what the
step-by-step path's `after_step` gives step by step: ids, step indices, ended returns and the counters after it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marl.runners.batched_episodes import EpisodeCounters
from marl.runners.batched_fragment import WorldColumns


def _counters_mid_episode(steps: int, worlds: int, agents: int, gen: torch.Generator) -> EpisodeCounters:
    """Counters after a start and a few steps: episodes in progress with lengths and returns of their own."""
    counters = EpisodeCounters((3 << 40) + 1, steps, worlds, agents, "cpu")
    counters.start()
    for t in range(3):
        done = torch.rand(worlds, generator=gen) < 0.3
        counters.after_step(t, torch.randn(worlds, agents, generator=gen), done, bool(done.any()))
    return counters


@pytest.mark.parametrize("end_rate", [0.0, 0.15, 0.6])
def test_a_fragment_at_once_matches_step_by_step(end_rate):
    steps, worlds, agents = 9, 7, 3
    gen = torch.Generator().manual_seed(int(end_rate * 100))
    stepwise = _counters_mid_episode(steps, worlds, agents, gen)
    bulk = EpisodeCounters(0, steps, worlds, agents, "cpu")
    bulk.next_id = stepwise.next_id
    bulk.ids, bulk.lengths, bulk.returns = stepwise.ids.clone(), stepwise.lengths.clone(), stepwise.returns.clone()
    rewards = torch.randn(steps, worlds, agents, generator=gen)
    done = torch.rand(steps, worlds, generator=gen) < end_rate
    done[4, 2] = done[5, 2] = True  # an episode one step long

    by_step = WorldColumns(steps, worlds, "cpu", None, False)
    for t in range(steps):
        by_step.eps_id[t], by_step.t[t] = stepwise.ids, stepwise.lengths
        stepwise.after_step(t, rewards[t], done[t], bool(done[t].any()))
    at_once = WorldColumns(steps, worlds, "cpu", None, False)
    bulk.after_fragment(at_once, rewards, done)

    assert torch.equal(at_once.eps_id, by_step.eps_id)
    assert torch.equal(at_once.t, by_step.t)
    np.testing.assert_allclose(bulk.ended_returns[done].numpy(), stepwise.ended_returns[done].numpy(), rtol=1e-12, atol=1e-12)
    assert bulk.next_id == stepwise.next_id
    assert torch.equal(bulk.ids, stepwise.ids)
    assert torch.equal(bulk.lengths, stepwise.lengths) and bulk.lengths.dtype == torch.int32
    np.testing.assert_allclose(bulk.returns.numpy(), stepwise.returns.numpy(), rtol=1e-12, atol=1e-12)


def test_start_hands_each_world_a_fresh_id():
    counters = EpisodeCounters(10, 4, 3, 2, "cpu")
    counters.start()
    counters.after_step(0, torch.ones(3, 2), torch.tensor([False, True, False]), True)
    assert counters.ids.tolist() == [10, 13, 12] and counters.next_id == 14
    assert counters.lengths.tolist() == [1, 0, 1]
    assert counters.returns.tolist() == [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    assert counters.ended_returns[0, 1].tolist() == [1.0, 1.0]
    counters.start()
    assert counters.ids.tolist() == [14, 15, 16] and counters.next_id == 17 and not counters.lengths.any()
