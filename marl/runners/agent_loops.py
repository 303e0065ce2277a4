"""The runner's per-agent bookkeeping as C-level loops (dict.update over zips, map over dict.get).

With thousands of agents per env copy, a Python statement per agent per step is
most of marl's cost on top of the env (benchmarks/many_agents.py). These helpers
do the same work as the plain loops they replaced, in the same order (so a
seeded run is unchanged), with the per-agent iteration inside CPython's C code.
"""

from __future__ import annotations

from itertools import repeat
from operator import add, itemgetter

import numpy as np


def env_runs(envs_idx) -> list[tuple[int, int, int]]:
    """(env copy, start, end) of each run of rows of one env copy in a block (rows come grouped by env copy)."""
    ks = np.asarray(envs_idx)
    if len(ks) == 0:
        return []
    cuts = (np.flatnonzero(ks[1:] != ks[:-1]) + 1).tolist()
    starts, ends = [0, *cuts], [*cuts, len(ks)]
    return [(int(ks[s]), s, e) for s, e in zip(starts, ends)]


def scatter_block(runs, agents: list, env_actions, actions: list[dict], pending: list[dict] | None, pid: str, row: int):
    """actions[k][agent] = the row's env action; pending[k][agent] = (pid, its row), for every row of a block."""
    for k, s, e in runs:
        block_agents = agents[s:e]
        actions[k].update(zip(block_agents, env_actions[s:e]))
        if pending is not None:
            pending[k].update(zip(block_agents, zip(repeat(pid), range(row + s, row + e))))


def add_rewards(rewards: dict, returns: dict, pending: dict, collectors: dict, collect: bool) -> None:
    """Each agent's reward into its episode return and, when collecting, onto its row awaiting reward."""
    if not rewards:
        return
    values = list(map(float, rewards.values()))
    returns.update(zip(rewards, map(add, map(returns.get, rewards, repeat(0.0)), values)))
    if not collect or not pending:
        return
    slots = list(map(pending.get, rewards))
    pids = dict.fromkeys(map(itemgetter(0), filter(None, slots)))
    if len(pids) == 1 and None not in slots:  # the usual step: every rewarded agent has a row of one policy
        (pid,) = pids
        rows = np.fromiter(map(itemgetter(1), slots), np.int64, len(slots))
        collectors[pid].rewards[rows] += np.asarray(values, np.float64)
        return
    for pid in pids:
        pairs = [(slot[1], v) for slot, v in zip(slots, values) if slot is not None and slot[0] == pid]
        rows = np.fromiter((r for r, _ in pairs), np.int64, len(pairs))
        collectors[pid].rewards[rows] += np.fromiter((v for _, v in pairs), np.float64, len(pairs))


def cut_pending(pending: dict, obs: dict, state, cut: dict, carried_state, stateful: set) -> None:
    """Appends one env copy's rows awaiting their next observation to `cut` (pid -> (rows, the observation
    reached or None, the global state reached, the agent's carried module state)), in pending order."""
    if not pending:
        return
    agents, slots = list(pending), list(pending.values())
    pids = list(dict.fromkeys(map(itemgetter(0), slots)))  # first-appearance order, as the rows were added
    for pid in pids:
        mine = agents if len(pids) == 1 else [a for a, s in zip(agents, slots) if s[0] == pid]
        rows = list(map(itemgetter(1), slots)) if len(pids) == 1 else [s[1] for s in slots if s[0] == pid]
        entry = cut.setdefault(pid, ([], [], [], []))
        entry[0].extend(rows)
        entry[1].extend(map(obs.get, mine))
        entry[2].extend(repeat(state, len(mine)))
        entry[3].extend([carried_state(pid, a) for a in mine] if pid in stateful else repeat(None, len(mine)))


class ActingLayouts:
    """Per env copy: its acting agents grouped by policy, in observation order, with their agent indices;
    kept while the episode and the set of acting agents stay the same (most steps of most envs), so the
    policy lookup per agent runs once per episode, not once per step."""

    def __init__(self, agent_index: dict):
        self.agent_index = agent_index
        self._cache: dict[int, tuple] = {}

    def groups(self, k: int, episode, obs: dict, bind) -> list[tuple[str, list, np.ndarray]]:
        """[(policy id, agents, their indices)] of env copy k's acting agents; `bind(episode, agent)` binds a new one."""
        keys = tuple(obs)
        hit = self._cache.get(k)
        if hit is not None and hit[0] == episode.id and hit[1] == keys:
            return hit[2]
        binding = episode.policy_of
        by_policy: dict[str, list] = {}
        for agent in keys:  # bound in observation order, as agents first act
            pid = binding.get(agent) or bind(episode, agent)
            by_policy.setdefault(pid, []).append(agent)
        get = self.agent_index.__getitem__
        layout = [(pid, agents, np.fromiter(map(get, agents), np.int64, len(agents))) for pid, agents in by_policy.items()]
        self._cache[k] = (episode.id, keys, layout)
        return layout


def gather_groups(pieces: list) -> tuple:
    """(env indices, agents, raw obs, episode ids, env steps, agent indices) of one policy's pieces
    [(env copy, agents, agent indices, raw obs, episode id, env step)], in piece order."""
    lengths = [len(p[1]) for p in pieces]
    envs_idx = np.repeat(np.fromiter((p[0] for p in pieces), np.int64, len(pieces)), lengths)
    agents = [a for p in pieces for a in p[1]] if len(pieces) > 1 else pieces[0][1]
    raw_obs = [o for p in pieces for o in p[3]] if len(pieces) > 1 else pieces[0][3]
    eps_ids = np.repeat(np.fromiter((p[4] for p in pieces), np.int64, len(pieces)), lengths)
    steps = np.repeat(np.fromiter((p[5] for p in pieces), np.int64, len(pieces)), lengths)
    agent_idx = np.concatenate([p[2] for p in pieces]) if len(pieces) > 1 else pieces[0][2]
    return envs_idx, agents, raw_obs, eps_ids, steps, agent_idx
