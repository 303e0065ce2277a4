"""Joint transitions of an agent group: one row per env step holding every agent of the group.

A runner's policy batch has one row per agent per step (grouped by episode
and agent). Value decomposition (VDN, QMIX) learns from the group's joint
step instead: all agents' observations and actions, the team reward (the sum
of the agents' rewards), the next observations, and the global state before
and after. The global state is the group's observations joined in group
order (for mpe2's simple_spread this is exactly the env's `state()`), or, where
the runners recorded it (`state` and `next_state` columns: MASAC/MADDPG with
`critic_state: global_state`), the env's global state as MAPPO's critic sees it.
"""

from __future__ import annotations

import numpy as np

from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.replay.nstep import nstep_transitions

STATE = sb.STATE
NEXT_STATE = sb.NEXT_STATE


def join_group_steps(batch: SampleBatch, agent_indices: list[int]) -> SampleBatch:
    """Per-agent rows -> per-step rows with [steps, n_agents, ...] obs, actions and next obs.

    Every agent of the group must act at every env step it is in (a
    simultaneous-move group whose agents live for the whole episode).
    """
    group = np.asarray(agent_indices)
    n = len(group)
    eps, t, agent = batch[sb.EPS_ID], batch[sb.T], batch[sb.AGENT_INDEX]
    order = np.lexsort((agent, t, eps))  # by episode, then step, then agent
    steps = len(order) // n
    complete = len(order) == steps * n
    if complete:
        step_eps, step_t = eps[order].reshape(steps, n), t[order].reshape(steps, n)
        complete = (
            bool(np.all(step_eps == step_eps[:, :1]))
            and bool(np.all(step_t == step_t[:, :1]))
            and bool(np.all(agent[order].reshape(steps, n) == group))
        )
    if not complete:
        keys, counts = np.unique(np.stack([eps, t]), axis=1, return_counts=True)
        bad = keys[:, counts != n][:, :1].ravel().tolist() or keys[:, :1].ravel().tolist()
        raise ConfigError(  # the env's agents leave or join mid-episode: a choice of algorithm, said in one line
            f"joint transitions need every agent of the group {group.tolist()} to act at every env step; "
            f"episode {bad[0]} step {bad[1]} has rows for agents "
            f"{sorted(agent[(eps == bad[0]) & (t == bad[1])].tolist())}: algorithms that learn from joint steps "
            "(VDN, QMIX, MASAC, MADDPG) need agents that act together from the start to the end of each episode; "
            "use one that learns per agent (PPO, DQN, SAC, ...)"
        )

    def per_step(name):
        col = batch[name][order]
        return col.reshape((steps, n) + col.shape[1:])

    recorded = {}
    if sb.STATE in batch and sb.NEXT_STATE in batch:  # one state per env step, shared by the group's rows
        recorded = {STATE: per_step(sb.STATE)[:, 0], NEXT_STATE: per_step(sb.NEXT_STATE)[:, 0]}
    return SampleBatch({
        **recorded,
        sb.OBS: per_step(sb.OBS),
        sb.ACTIONS: per_step(sb.ACTIONS),
        sb.NEXT_OBS: per_step(sb.NEXT_OBS),
        sb.REWARDS: per_step(sb.REWARDS).sum(axis=1),
        sb.TERMINATEDS: per_step(sb.TERMINATEDS).all(axis=1),
        sb.TRUNCATEDS: per_step(sb.TRUNCATEDS).any(axis=1),
        sb.SEGMENT_END: per_step(sb.SEGMENT_END).any(axis=1),
        sb.EPS_ID: per_step(sb.EPS_ID)[:, 0],
        sb.T: per_step(sb.T)[:, 0],
    })


def joint_transitions(batch: SampleBatch, agent_indices: list[int], n_step: int, gamma: float) -> SampleBatch:
    """n-step joint transitions of the group, with the global state before and after."""
    steps = join_group_steps(batch, agent_indices)
    out = nstep_transitions(steps, n_step, gamma, keep=(STATE,))
    if STATE not in out:
        out[STATE] = out[sb.OBS].reshape(len(out), -1)
        out[NEXT_STATE] = out[sb.NEXT_OBS].reshape(len(out), -1)
    return out
