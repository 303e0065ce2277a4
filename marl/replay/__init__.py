"""Replay: ring buffers of NumPy columns (uniform and prioritised), n-step transitions."""

from marl.replay.buffers import REPLAY_WEIGHTS, PrioritizedReplayBuffer, ReplayBuffer, buffer_settings, make_replay_buffer
from marl.replay.nstep import DISCOUNTS, nstep_transitions
from marl.replay.segment_tree import MinSegmentTree, SumSegmentTree

__all__ = [
    "DISCOUNTS",
    "REPLAY_WEIGHTS",
    "MinSegmentTree",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "SumSegmentTree",
    "buffer_settings",
    "make_replay_buffer",
    "nstep_transitions",
]
