"""Sum and min segment trees over a power-of-two array, with vectorised updates and queries.

Prioritised replay (Schaul et al. 2016) samples transition i with probability
p_i^alpha / sum_j p_j^alpha. A sum tree finds the leaf where a prefix sum
crosses a mass u in O(log N); a min tree gives min_j p_j for the largest
importance weight. Every operation takes arrays of indices, so a 256-item
batch costs one pass per tree level (about 20 for 1M leaves), not 256.
"""

from __future__ import annotations

import numpy as np


class SegmentTree:
    """Binary tree in an array: node i has children 2i and 2i+1; leaves start at `size`."""

    def __init__(self, capacity: int, op, neutral: float):
        if capacity < 1:
            raise ValueError(f"segment tree capacity must be >= 1, got {capacity}")
        size = 1
        while size < capacity:
            size *= 2
        self.size = size
        self.capacity = capacity
        self._op = op
        self._neutral = neutral
        self.tree = np.full(2 * size, neutral, dtype=np.float64)

    def __setitem__(self, idx, values) -> None:
        idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), idx.shape)
        nodes = idx + self.size
        self.tree[nodes] = values  # with repeated indices the last value wins, as in a loop
        # Parents of a sorted index set are sorted: dedupe by neighbours, one sort in all.
        nodes = np.unique(nodes // 2)
        tree, op = self.tree, self._op
        while True:
            tree[nodes] = op(tree[2 * nodes], tree[2 * nodes + 1])
            if nodes[0] == 1:
                break
            nodes = nodes // 2
            if len(nodes) > 1:
                nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]

    def __getitem__(self, idx):
        return self.tree[np.asarray(idx) + self.size]

    def reduce(self) -> float:
        """The reduction over all leaves."""
        return float(self.tree[1])


class SumSegmentTree(SegmentTree):
    def __init__(self, capacity: int):
        super().__init__(capacity, np.add, 0.0)

    def find_prefixsum_idx(self, mass: np.ndarray) -> np.ndarray:
        """For each u in `mass`, the smallest leaf i with sum(leaves[:i+1]) > u."""
        mass = np.array(mass, dtype=np.float64, copy=True)
        nodes = np.ones(mass.shape, dtype=np.int64)
        tree = self.tree
        while nodes[0] < self.size:  # all nodes sit at the same depth
            left = 2 * nodes
            left_sum = tree[left]
            go_right = mass >= left_sum
            mass = np.where(go_right, mass - left_sum, mass)
            nodes = np.where(go_right, left + 1, left)
        return nodes - self.size


class MinSegmentTree(SegmentTree):
    def __init__(self, capacity: int):
        super().__init__(capacity, np.minimum, np.inf)
