"""Joint transitions of an agent group: one row per env step holding every agent of the group.

A runner's policy batch has one row per agent per step (grouped by episode
and agent). Value decomposition (VDN, QMIX) learns from the group's joint
step instead: all agents' observations and actions, the team reward (the sum
of the agents' rewards), the next observations, and the global state before
and after. The global state is the group's observations joined in group
order (for mpe2's simple_spread this is exactly the env's `state()`), or, where
the runners recorded it (`state` and `next_state` columns: MASAC/MADDPG with
`critic_state: global_state`), the env's global state as MAPPO's critic sees it.

Agents that die (PettingZoo envs drop an agent once it terminates: knights_archers_zombies,
MAgent2's battles) keep a padded place at every later step of the episode, as SMAC gives
EPyMARL's learners: zero obs and next obs, action 0 (a valid index; a zero vector for Box
actions), reward 0, and `alive` False. `alive` [steps, n] marks the real rows; `next_alive`
those whose agent still acts at the next step (not terminated), so the losses leave a dead
agent out of Q_tot and out of the bootstrap (`marl.algorithms.live_agents`). An agent absent at an
episode's first step (one that joins later) is refused in one line: a recurrent agent network would
run through its padded steps before it joins and reach its first real step in a state it never acted
from, and the envs whose agents come and go here (knights_archers_zombies, MAgent2) only remove them.
Each episode's first fragment holds its step 0, so a late joiner is refused there even when it joins
at a fragment boundary.
"""

from __future__ import annotations

import numpy as np

from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.replay.nstep import nstep_transitions

STATE = sb.STATE
NEXT_STATE = sb.NEXT_STATE
ALIVE = "alive"  # [steps, n] bool: the agent acted at this step (False: a padded place of a dead agent)
NEXT_ALIVE = "next_alive"  # [steps, n] bool: it acts at the next step too (alive and not terminated)


class JointLayout:
    """Where each per-agent row goes among the joint steps: its step and its place in the group."""

    def __init__(self, batch: SampleBatch, agent_indices: list[int]):
        group = np.asarray(agent_indices)
        self.n = n = len(group)
        eps, t, agent = batch[sb.EPS_ID], batch[sb.T], batch[sb.AGENT_INDEX]
        self.order = order = np.lexsort((agent, t, eps))  # by episode, then step, then agent
        eps, t, agent = eps[order], t[order], agent[order]
        place_of = np.full(max(int(group.max()), int(agent.max(initial=0))) + 1, -1, np.int64)
        place_of[group] = np.arange(n)
        self.place = place_of[agent]
        if (self.place < 0).any():
            raise ConfigError(f"joint transitions of the group {group.tolist()} got rows of agent "
                              f"{int(agent[self.place < 0][0])}, which is not in it (each group's policy batch holds its own agents)")
        new_step = np.ones(len(order), bool)
        new_step[1:] = (eps[1:] != eps[:-1]) | (t[1:] != t[:-1])
        self.step = np.cumsum(new_step) - 1
        self.steps = int(self.step[-1]) + 1 if len(order) else 0
        self.step_eps, self.step_t = eps[new_step], t[new_step]
        # Every agent at every step, in group order (groups whose agents never die): rows reshape into steps.
        self.complete = len(order) == self.steps * n and bool((self.place.reshape(self.steps, n) == np.arange(n)).all())
        if self.complete:
            self.alive, self.row = np.ones((self.steps, n), bool), order.reshape(self.steps, n)
            return
        self.alive = np.zeros((self.steps, n), bool)
        self.alive[self.step, self.place] = True
        self.row = np.full((self.steps, n), -1, np.int64)  # each place's row in the batch; -1 where padded
        self.row[self.step, self.place] = order
        if self.alive.sum() < len(order):
            bad = np.flatnonzero(np.diff(self.step) == 0)
            bad = bad[self.place[bad] == self.place[bad + 1]][0]
            raise ConfigError(f"joint transitions: episode {int(eps[bad])} step {int(t[bad])} has two rows for agent {int(agent[bad])}")
        self._refuse_joins(group)

    def _refuse_joins(self, group) -> None:
        """An agent may leave (die) but not arrive: absent at an episode's first step, or back after leaving."""
        same_episode = np.zeros(self.steps, bool)
        same_episode[1:] = self.step_eps[1:] == self.step_eps[:-1]
        joins = self.alive & ~np.vstack([np.zeros((1, self.n), bool), self.alive[:-1]]) & same_episode[:, None]
        absent_at_start = ~self.alive & (self.step_t == 0)[:, None]
        if joins.any() or absent_at_start.any():
            late = not absent_at_start.any()  # the first cause said first
            step, place = (int(i) for i in np.argwhere(joins if late else absent_at_start)[0])
            where = f"episode {int(self.step_eps[step])} step {int(self.step_t[step])}"
            raise ConfigError(
                f"joint transitions of the group {group.tolist()}: agent {int(group[place])} "
                + (f"joins {where} after being absent" if late else f"is absent at {where}, the episode's first")
                + " (agents that die are padded after their last step; agents that join mid-episode are not supported): "
                "algorithms that learn from joint steps (VDN, QMIX, MASAC, MADDPG) need every agent of the group from "
                "the start of each episode; use one that learns per agent (PPO, DQN, SAC, ...)"
            )

    def per_step(self, values: np.ndarray) -> np.ndarray:
        """[rows, ...] in the batch's order -> [steps, n, ...], zeros at the padded places."""
        if self.complete:
            return values[self.order].reshape((self.steps, self.n) + values.shape[1:])
        out = np.zeros((self.steps, self.n) + values.shape[1:], values.dtype)
        out[self.step, self.place] = values[self.order]
        return out

    def any_alive(self, flags: np.ndarray) -> np.ndarray:
        """[rows] flags -> [steps]: set on a live agent's row of the step."""
        flags = self.per_step(flags)
        return (flags if self.complete else flags & self.alive).any(axis=1)


def join_group_steps(batch: SampleBatch, agent_indices: list[int], layout: JointLayout | None = None) -> SampleBatch:
    """Per-agent rows -> per-step rows with [steps, n_agents, ...] obs, actions and next obs, and `alive`.

    Every agent of the group must act from the first step of each episode; one that dies is padded after.
    """
    layout = layout or JointLayout(batch, agent_indices)
    per_step, alive = layout.per_step, layout.alive
    terminated = per_step(batch[sb.TERMINATEDS].astype(bool))
    team_terminated = (terminated | ~alive).all(axis=1)  # every agent still alive ended with the episode
    # A piece of the group ends where a live agent's piece ends other than by its own death (fragment cuts,
    # truncations), or where the episode does: one agent's death does not end its team's piece.
    piece_end = layout.any_alive(batch[sb.SEGMENT_END].astype(bool) & ~batch[sb.TERMINATEDS].astype(bool)) | team_terminated
    recorded = {}
    if sb.STATE in batch and sb.NEXT_STATE in batch:  # one state per env step, shared by the group's rows
        first_alive = layout.row[np.arange(layout.steps), alive.argmax(axis=1)]
        recorded = {STATE: batch[sb.STATE][first_alive], NEXT_STATE: batch[sb.NEXT_STATE][first_alive]}
    return SampleBatch({
        **recorded,
        sb.OBS: per_step(batch[sb.OBS]),
        sb.ACTIONS: per_step(batch[sb.ACTIONS]),
        sb.NEXT_OBS: per_step(batch[sb.NEXT_OBS]),
        sb.REWARDS: per_step(batch[sb.REWARDS]).sum(axis=1),
        sb.TERMINATEDS: team_terminated,
        sb.TRUNCATEDS: layout.any_alive(batch[sb.TRUNCATEDS].astype(bool)),
        sb.SEGMENT_END: piece_end,
        sb.EPS_ID: layout.step_eps,
        sb.T: layout.step_t,
        ALIVE: alive,
        NEXT_ALIVE: alive & ~terminated,
    })


def alive_before_padding(buffer, transitions: SampleBatch) -> None:
    """A buffer restored from a checkpoint written before dead agents were padded holds joint rows without
    `alive`/`next_alive`; such groups were refused then, so every agent of those rows acted: both True there.
    Called before each joint store; a no-op on any other buffer."""
    columns = buffer.columns
    if columns is None:
        return
    for name in (ALIVE, NEXT_ALIVE):
        if name in transitions and name not in columns:
            columns[name] = np.ones((buffer.capacity,) + transitions[name].shape[1:], bool)


def joint_transitions(batch: SampleBatch, agent_indices: list[int], n_step: int, gamma: float) -> SampleBatch:
    """n-step joint transitions of the group, with the global state before and after."""
    steps = join_group_steps(batch, agent_indices)
    out = nstep_transitions(steps, n_step, gamma, keep=(STATE, ALIVE), keep_next=(NEXT_ALIVE,))
    if STATE not in out:
        out[STATE] = out[sb.OBS].reshape(len(out), -1)
        out[NEXT_STATE] = out[sb.NEXT_OBS].reshape(len(out), -1)
    return out
