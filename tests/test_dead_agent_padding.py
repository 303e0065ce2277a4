"""Joint-step algorithms (VDN, QMIX, MASAC, MADDPG) on envs whose agents die mid-episode: a dead agent's place
is padded (zero obs, action 0, reward 0, alive False) at every later step, and the losses leave it out."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from marl import MADDPGConfig, MASACConfig, MultiAgentEnv, QMIXConfig, VDNConfig, register_env
from marl.algorithms.maddpg import loss as maddpg_loss
from marl.algorithms.masac import loss as masac_loss
from marl.algorithms.mixing.loss import mixing_loss
from marl.data import sample_batch as sb
from marl.errors import ConfigError
from marl.replay import REPLAY_WEIGHTS
from marl.replay.buffers import ReplayBuffer
from marl.replay.joint import (
    ALIVE, NEXT_ALIVE, NEXT_STATE, STATE, alive_before_padding, join_group_steps, joint_transitions,
)

LIMIT, DEATH = 8, 3  # episodes are truncated after LIMIT steps; agent "c" terminates at its DEATH-th step


class _Skirmish(MultiAgentEnv):
    """Three agents; "c" dies (terminates, then is gone) after acting DEATH times, the others play to LIMIT.
    obs = [t + 1, agent number + 1, last action] (never zero, so padding shows); reward = the agent's action + 1."""

    def __init__(self, continuous: bool = False, late_joiner: bool = False):
        self.possible_agents = ["a", "b", "c"]
        self.metadata = {"name": "skirmish", "turn_based": False}
        self.continuous, self.late_joiner = continuous, late_joiner  # late_joiner: "c" first acts at step 2, never dies

    def observation_space(self, agent):
        return gym.spaces.Box(-100, 100, (3,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Box(-1, 1, (2,), np.float32) if self.continuous else gym.spaces.Discrete(3)

    def _obs(self, agents, actions=None):
        return {a: np.array([self.t + 1, self.possible_agents.index(a) + 1, 0.0 if actions is None else np.sum(actions[a])],
                            np.float32) for a in agents}

    def reset(self, seed=None):
        self.t, self.agents = 0, list(self.possible_agents[:2] if self.late_joiner else self.possible_agents)
        return self._obs(self.agents), {}

    def step(self, actions):
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.t += 1
        done = self.t >= LIMIT
        rewards = {a: float(np.sum(actions[a])) + 1.0 for a in actions}
        terms = {a: a == "c" and self.t == DEATH and not self.late_joiner for a in actions}
        self.agents = [a for a in actions if not terms[a]] + (["c"] if self.late_joiner and self.t == 2 else [])
        obs = self._obs(self.agents, {a: actions.get(a, 0) for a in self.agents})
        truncs = {a: done for a in actions}
        return obs, rewards, {**terms, "__all__": done}, {**truncs, "__all__": done}, {}

    def state(self):
        return np.array([self.t, len(self.agents)], np.float32)


register_env("skirmish", lambda cfg: _Skirmish(**cfg))


def _config(config_cls, continuous=False, **training):
    return (config_cls().environment("skirmish", env_config={"continuous": continuous})
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=LIMIT)
            .training(**{"train_batch_size": 16, "num_steps_sampled_before_learning_starts": 16,
                         "min_env_steps_per_iteration": 2 * LIMIT, "model": {"hiddens": [16]}, **training})
            .debugging(seed=0))


def _sampled_rows(algo):
    return algo.runners.local.sample().batch.policy_batches["default_policy"]


def _vdn_rows():
    """One fragment of two episodes (2 envs x LIMIT steps) of VDN's runner on the skirmish."""
    algo = _config(VDNConfig).build()
    try:
        return _sampled_rows(algo)
    finally:
        algo.stop()


def test_runner_rows_join_with_the_dead_agent_padded():
    rows = _vdn_rows()
    assert len(rows) == 2 * (2 * LIMIT + DEATH)  # two episodes: "c" acts DEATH times, the others LIMIT times
    joint = join_group_steps(rows, [0, 1, 2])
    assert len(joint) == 2 * LIMIT
    assert joint[sb.OBS].shape == (2 * LIMIT, 3, 3) and joint[sb.ACTIONS].shape == (2 * LIMIT, 3)
    t = joint[sb.T]
    expected_alive = np.ones((2 * LIMIT, 3), bool)
    expected_alive[:, 2] = t < DEATH
    np.testing.assert_array_equal(joint[ALIVE], expected_alive)
    np.testing.assert_array_equal(joint[NEXT_ALIVE][:, 2], t < DEATH - 1)  # not at its last step: it terminated there
    assert joint[NEXT_ALIVE][:, :2].all()
    dead = ~expected_alive
    for name in (sb.OBS, sb.NEXT_OBS, sb.ACTIONS):
        assert (joint[name][dead] == 0).all(), name
    # the live places hold the runner's rows unchanged
    for step in range(len(joint)):
        for place in range(3):
            if not expected_alive[step, place]:
                continue
            row = np.flatnonzero((rows[sb.EPS_ID] == joint[sb.EPS_ID][step]) & (rows[sb.T] == t[step]) & (rows[sb.AGENT_INDEX] == place))
            assert len(row) == 1
            for name in (sb.OBS, sb.NEXT_OBS, sb.ACTIONS):
                np.testing.assert_array_equal(joint[name][step, place], rows[name][row[0]])
    team = [rows[sb.REWARDS][(rows[sb.EPS_ID] == e) & (rows[sb.T] == s)].sum() for e, s in zip(joint[sb.EPS_ID], t)]
    np.testing.assert_allclose(joint[sb.REWARDS], team)  # a dead agent adds reward 0
    # "c"'s death ends neither the episode nor its team's piece: only truncation at LIMIT does
    np.testing.assert_array_equal(joint[sb.TERMINATEDS], np.zeros(2 * LIMIT, bool))
    np.testing.assert_array_equal(joint[sb.SEGMENT_END], t == LIMIT - 1)
    # 2-step transitions bootstrap from the step 2 ahead: "c" is not alive there from its second-last step on
    tr = joint_transitions(rows, [0, 1, 2], n_step=2, gamma=0.5)
    np.testing.assert_array_equal(tr[ALIVE], joint[ALIVE])
    np.testing.assert_array_equal(tr[NEXT_ALIVE][:, 2], t < DEATH - 2)
    np.testing.assert_array_equal(tr[STATE][t == DEATH + 1][:, 6:], 0)  # the joined obs: "c"'s part is zeros


def test_an_agent_that_joins_mid_episode_is_refused_in_one_line():
    algo = (VDNConfig().environment("skirmish", env_config={"late_joiner": True})
            .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=LIMIT).debugging(seed=0).build())
    try:
        with pytest.raises(ConfigError, match=r"agent 2 is absent at episode \d+ step 0, the episode's first .*per agent") as err:
            algo.train()
        assert "\n" not in str(err.value)
    finally:
        algo.stop()


def _tensors(batch) -> dict:
    return {k: torch.as_tensor(np.asarray(v)) for k, v in batch.items()}


def _with_garbage(batch: dict, seed: int) -> dict:
    """The batch with other values at the dead agents' places: obs, next obs and actions (valid action indices)."""
    rng = np.random.default_rng(seed)
    out = dict(batch)
    dead, next_dead = ~batch[ALIVE].numpy(), ~batch[NEXT_ALIVE].numpy()
    for name, where in ((sb.OBS, dead), (sb.NEXT_OBS, next_dead), (sb.ACTIONS, dead)):
        values = out[name].numpy().copy()
        if name == sb.ACTIONS and not np.issubdtype(values.dtype, np.floating):
            values[where] = rng.integers(0, 3, values[where].shape)
        else:
            values[where] = rng.normal(0, 50, values[where].shape)
        out[name] = torch.as_tensor(values)
    return out


def _without_masks(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if k not in (ALIVE, NEXT_ALIVE)}


def _replayed(algo, n_step=1) -> dict:
    """Joint transitions of two sampled episodes as the learner gets them (weights 1)."""
    rows = _sampled_rows(algo)
    tr = joint_transitions(rows, [0, 1, 2], n_step=n_step, gamma=0.9)
    tr[REPLAY_WEIGHTS] = np.ones(len(tr), np.float32)
    batch = _tensors(tr)
    assert (~batch[ALIVE]).any() and (~batch[NEXT_ALIVE]).any()
    return batch


@pytest.mark.parametrize("config_cls", [VDNConfig, QMIXConfig])
def test_mixing_loss_ignores_what_the_dead_agents_places_hold(config_cls):
    """Two batches that differ only at the dead agents' padded places (their obs, next obs and actions, hence their
    Q values) give the same loss and gradients; without the alive masks they do not (the mutant this test catches)."""
    algo = _config(config_cls).build()
    try:
        module = algo.learners.local.module["default_policy"]
        cfg = algo.learners.local.train_cfgs["default_policy"]
        batch = _replayed(algo, n_step=2)

        def loss_and_grads(b):
            module.zero_grad()
            loss, _ = mixing_loss(module, b, cfg)
            loss.backward()
            return loss.detach(), [p.grad.clone() for p in module.parameters() if p.grad is not None]

        loss_1, grads_1 = loss_and_grads(_with_garbage(batch, 1))
        loss_2, grads_2 = loss_and_grads(_with_garbage(batch, 2))
        loss_0, _ = loss_and_grads(batch)
        torch.testing.assert_close(loss_1, loss_2)
        torch.testing.assert_close(loss_1, loss_0)
        assert len(grads_1) == len(grads_2) > 0
        for g1, g2 in zip(grads_1, grads_2):
            torch.testing.assert_close(g1, g2)
        unmasked_1, _ = loss_and_grads(_without_masks(_with_garbage(batch, 1)))
        unmasked_2, _ = loss_and_grads(_without_masks(_with_garbage(batch, 2)))
        assert not torch.isclose(unmasked_1, unmasked_2)
    finally:
        algo.stop()


CENTRAL = [(MASACConfig, masac_loss, False), (MASACConfig, masac_loss, True),
           (MADDPGConfig, maddpg_loss, False), (MADDPGConfig, maddpg_loss, True)]


@pytest.mark.parametrize("config_cls,losses,continuous", CENTRAL)
def test_centralised_losses_ignore_what_the_dead_agents_places_hold(config_cls, losses, continuous):
    """MASAC/MADDPG with the critics on the env's global state (so the agents' obs reach the actors only): a dead
    agent's obs, next obs and replayed action change no loss term (the same random draws: the same seed)."""
    algo = _config(config_cls, continuous, critic_state="global_state").build()
    try:
        module = algo.learners.local.module["default_policy"]
        cfg = algo.learners.local.train_cfgs["default_policy"]
        batch = _replayed(algo)
        assert STATE in batch and NEXT_STATE in batch

        def terms(b):
            out = []
            for term in (losses.critic_loss, losses.actor_loss) + ((losses.alpha_loss,) if hasattr(losses, "alpha_loss") else ()):
                torch.manual_seed(0)
                out.append(term(module, b, cfg, {})[0].detach())
            return torch.stack(out)

        torch.testing.assert_close(terms(_with_garbage(batch, 1)), terms(_with_garbage(batch, 2)))
        torch.testing.assert_close(terms(_with_garbage(batch, 1)), terms(batch))
        assert not torch.allclose(terms(_without_masks(_with_garbage(batch, 1))), terms(_without_masks(_with_garbage(batch, 2))))
    finally:
        algo.stop()


@pytest.mark.parametrize("config_cls,continuous", [(MASACConfig, False), (MASACConfig, True),
                                                   (MADDPGConfig, False), (MADDPGConfig, True)])
def test_centralised_algorithms_train_on_an_env_whose_agents_die(config_cls, continuous):
    algo = _config(config_cls, continuous).build()
    try:
        for _ in range(2):
            result = algo.train()
        buffer = algo.replay_buffers["default_policy"]
        assert len(buffer) == result["env_steps_total"] and not buffer.columns[ALIVE][: len(buffer)].all()
        losses = {k: v for k, v in result.items() if k.startswith("losses/default_policy/") and k.endswith("loss")}
        assert losses and all(np.isfinite(v) for v in losses.values()), losses
    finally:
        algo.stop()


@pytest.mark.parametrize("burn_in", [0, 2])
def test_recurrent_qmix_replays_sequences_with_the_dead_agent_padded(burn_in):
    """Recurrent agents: chunks of joint steps carry alive/next_alive, and a dead agent's place starts from zeros
    (burn-in 2: the chunk from step 3 warms up from step 1, where "c" still acts but has no stored state)."""
    algo = _config(QMIXConfig, model={"hiddens": [16], "recurrent": "gru", "cell_size": 8, "max_seq_len": 3},
                   train_batch_size=4, num_steps_sampled_before_learning_starts=4, burn_in=burn_in).build()
    try:
        for _ in range(2):
            result = algo.train()
        columns = algo.replay_buffers["default_policy"].columns
        held = len(algo.replay_buffers["default_policy"])
        alive, start = columns[ALIVE][:held], columns["h0.h"][:held]  # [rows, max_seq_len, 3], [rows, 3, cell]
        first_step = columns[sb.OBS][:held, 0, 0, 0]  # t + 1 of each row's first step (agent "a" is never padded)
        assert not alive[:, :, 2].all() and alive[:, :, :2][columns["seq_mask"][:held] > 0].all()
        dead_from_start = first_step > DEATH  # chunks that start after "c" died
        assert dead_from_start.any() and (start[dead_from_start, 2] == 0).all() and (start[dead_from_start, 0] != 0).any()
        assert np.isfinite(result["losses/default_policy/loss"])
    finally:
        algo.stop()


def test_qmix_trains_on_knights_archers_zombies_where_agents_die():
    """A real env whose agents die mid-episode (knights_archers_zombies: a zombie reaching an agent kills it; the
    env drops it): QMIX stores padded joint steps and learns from them (the old joint join refused this env)."""
    pytest.importorskip("pymunk", reason="knights_archers_zombies needs pymunk (pettingzoo[butterfly])")
    algo = (QMIXConfig().environment("pettingzoo.butterfly.knights_archers_zombies_v11",
                                     env_config={"max_cycles": 300, "spawn_delay": 5})
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=100)
            .training(train_batch_size=32, num_steps_sampled_before_learning_starts=100, min_env_steps_per_iteration=200,
                      model={"hiddens": [32]})
            .debugging(seed=0).build())
    try:
        for _ in range(2):
            result = algo.train()
        buffer = algo.replay_buffers["default_policy"]
        alive = buffer.columns[ALIVE][: len(buffer)]
        assert len(buffer) == result["env_steps_total"] == 400 and alive.shape == (400, 4)
        assert (~alive).any(), "no agent died in 400 env steps: the test does not test anything"
        assert (buffer.columns[sb.OBS][: len(buffer)][~alive] == 0).all()
        assert np.isfinite(result["losses/default_policy/loss"])
    finally:
        algo.stop()


def test_a_joint_buffer_saved_before_the_padding_takes_padded_rows_after_a_restore():
    rows = _vdn_rows()
    new = joint_transitions(rows, [0, 1, 2], n_step=1, gamma=0.9)
    old = {k: v for k, v in new.items() if k not in (ALIVE, NEXT_ALIVE)}  # a joint row as the code before wrote it
    saved = ReplayBuffer(100)
    saved.add(type(new)(old))
    restored = ReplayBuffer(100)
    restored.set_state(saved.get_state())
    with pytest.raises(ValueError, match="differ"):  # what a restored run met at its first store without the shim
        restored.add(new)
    alive_before_padding(restored, new)
    restored.add(new)
    n = len(old[sb.OBS])
    assert restored.columns[ALIVE][:n].all() and restored.columns[NEXT_ALIVE][:n].all()  # the old rows: all acted
    np.testing.assert_array_equal(restored.columns[ALIVE][n:2 * n], new[ALIVE])
    np.testing.assert_array_equal(restored.columns[sb.OBS][:n], old[sb.OBS])
