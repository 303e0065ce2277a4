"""Meta-solvers: a mixture over a symmetric population from its payoff table.

`payoffs[i, j]` is member i's expected return against member j (seats averaged). Each solver
returns a probability vector over the members:

- `nash`: a Nash equilibrium of the two-player zero-sum meta-game by linear programming
  (SciPy's `linprog`: maximise v subject to x^T A >= v, sum x = 1, x >= 0). Zero-sum means
  `payoffs + payoffs.T == 0`; anything else is refused (its LP would not be a Nash equilibrium).
- `prd`: projected replicator dynamics (Lanctot et al. 2017): replicator steps projected onto
  the simplex with every probability >= gamma / n, the average of the later half of the run.
- `uniform`: every member alike (fictitious play).
"""

from __future__ import annotations

import numpy as np

from marl.errors import ConfigError

META_SOLVERS = ("nash", "prd", "uniform")


def _checked(payoffs) -> np.ndarray:
    a = np.asarray(payoffs, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ConfigError(f"a meta-solver needs a square, non-empty payoff table (the population); got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ConfigError("the payoff table has missing (NaN) or infinite entries: every pair of members must have played")
    return a


def nash(payoffs, tolerance: float = 1e-6) -> np.ndarray:
    a = _checked(payoffs)
    gap = float(np.max(np.abs(a + a.T)))
    if gap > tolerance * max(1.0, float(np.max(np.abs(a)))):
        raise ConfigError(f"meta_solver 'nash' solves two-player zero-sum games, and this payoff table is not zero-sum "
                          f"(max |A + A^T| = {gap:.3g}); use meta_solver 'prd' or 'uniform'")
    n = a.shape[0]
    # variables [x_1..x_n, v]; minimise -v; for every column j: v - sum_i x_i a_ij <= 0
    cost = np.zeros(n + 1)
    cost[-1] = -1.0
    upper = np.hstack([-a.T, np.ones((n, 1))])
    equal = np.hstack([np.ones((1, n)), np.zeros((1, 1))])
    from scipy.optimize import linprog  # (imported here: SciPy's import costs every `marl` command ~0.7 s)

    res = linprog(cost, A_ub=upper, b_ub=np.zeros(n), A_eq=equal, b_eq=[1.0],
                  bounds=[(0, None)] * n + [(None, None)], method="highs")
    if not res.success:  # cannot happen for a finite zero-sum table; said plainly if HiGHS disagrees
        raise ConfigError(f"the Nash LP of the meta-game failed: {res.message}")
    x = np.clip(res.x[:n], 0.0, None)
    return x / x.sum()


def prd(payoffs, iterations: int = 20000, step: float = 1e-3, gamma: float = 1e-6) -> np.ndarray:
    a = _checked(payoffs)
    n = a.shape[0]
    x = np.full(n, 1.0 / n)
    floor = gamma / n
    total, kept = np.zeros(n), 0
    for t in range(iterations):
        fitness = a @ x
        x = x + step * x * (fitness - x @ fitness)
        x = _project(x, floor)
        if t >= iterations // 2:
            total += x
            kept += 1
    return total / kept


def _project(x: np.ndarray, floor: float) -> np.ndarray:
    """Euclidean projection onto {x : sum x = 1, x_i >= floor}."""
    n = x.shape[0]
    shifted = x - floor
    budget = 1.0 - floor * n
    u = np.sort(shifted)[::-1]
    cumulative = np.cumsum(u) - budget
    k = np.nonzero(u - cumulative / np.arange(1, n + 1) > 0)[0][-1]
    theta = cumulative[k] / (k + 1)
    return np.maximum(shifted - theta, 0.0) + floor


def uniform(payoffs) -> np.ndarray:
    a = _checked(payoffs)
    return np.full(a.shape[0], 1.0 / a.shape[0])


def solve(name: str, payoffs) -> np.ndarray:
    if name not in META_SOLVERS:
        raise ConfigError(f"unknown meta_solver {name!r}; allowed: {list(META_SOLVERS)}")
    return {"nash": nash, "prd": prd, "uniform": uniform}[name](payoffs)
