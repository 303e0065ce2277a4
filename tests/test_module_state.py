"""Module state and columns on demand: what runners hand a module, and what they compute for an algorithm.

`StepCounter` is a stateful test module: each agent's state counts the steps
that agent has acted in its episode and records whose state it is. The
batches' `state_in.*` tables show what the runner fed it (`max_seq_len: 1`: every row
starts a training sequence, so the runner stores the state of every row), so the tests can
prove the state starts fresh at each agent's episode start, advances only
when the agent acts, survives fragment cuts and checkpoints, and is never
shared between agents or env copies.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

import marl
from marl.data import MultiAgentBatch
from marl.data import sample_batch as sb
from marl.envs import MultiAgentEnv
from marl.modules import QMLP, RLModule
from marl.runners import EnvRunner

COUNT, OWNER = sb.state_in_column("count"), sb.state_in_column("owner")


class StepCounter(RLModule):
    """Uniform over the legal actions; state = (steps this agent acted this episode, the agent's index)."""

    inputs = ("obs", "action_mask", "agent_index")
    seen: list = []  # (episode_start, count) of every row acted on while `record` is set (evaluation checks)
    record = False

    def get_initial_state(self):
        return {"count": torch.tensor(0, dtype=torch.int64), "owner": torch.tensor(-1, dtype=torch.int64)}

    def forward_train(self, batch):
        logits = torch.zeros(batch["obs"].shape[0], self.action_dim)
        return {"action_dist_inputs": self.apply_action_mask(logits, batch), "vf_preds": torch.zeros(len(logits))}

    def forward_exploration(self, batch):
        out = self.forward_train(batch)
        state = batch["state_in"]
        if StepCounter.record:
            StepCounter.seen.extend(zip(batch["episode_start"].tolist(), state["count"].tolist()))
        out["state_out"] = {"count": state["count"] + 1, "owner": batch["agent_index"].clone()}
        return out

    forward_inference = forward_exploration


class StaggeredEnv(MultiAgentEnv):
    """Three simultaneous agents, each ending at its own random step (3..11); the episode is cut at 12.

    So env copies run out of phase and agents of one episode live for different lengths.
    """

    possible_agents = ["a0", "a1", "a2"]
    metadata = {"name": "staggered", "turn_based": False}

    def __init__(self, config=None):
        self.space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return self.space

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def reset(self, seed=None):
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.ends = {a: int(self.rng.integers(3, 12)) for a in self.possible_agents}
        self.alive = list(self.possible_agents)
        return {a: self.rng.uniform(-1, 1, 2).astype(np.float32) for a in self.alive}, {}

    def step(self, actions):
        self.t += 1
        ended = [a for a in self.alive if self.t >= self.ends[a]]
        cut = self.t >= 12
        obs = {a: self.rng.uniform(-1, 1, 2).astype(np.float32) for a in self.alive}
        rewards = {a: 1.0 for a in self.alive}
        terms = {a: a in ended for a in self.alive}
        truncs = {a: cut and a not in ended for a in self.alive}
        self.alive = [a for a in self.alive if a not in ended]
        done = not self.alive or cut
        terms["__all__"], truncs["__all__"] = done, done
        return obs, rewards, terms, truncs, {}


marl.register_env("staggered_test", lambda config: StaggeredEnv(config))


def _config(env: str = "staggered_test", **runner):
    cfg = (
        marl.PPOConfig()
        .environment(env)
        .env_runners(**({"num_envs_per_env_runner": 3, "rollout_fragment_length": 5} | runner))
        .multi_agent(policies={"default_policy": {"module_class": StepCounter}})
        .training(model={"max_seq_len": 1})
        .debugging(seed=3)
    )
    cfg.validate()
    return cfg


def _check_counts(batch: sb.SampleBatch, step: int) -> int:
    """Each (episode, agent)'s rows, in step order, were fed that agent's states 0, 1, 2, ...; returns their number."""
    eps, agent, t = batch[sb.EPS_ID], batch[sb.AGENT_INDEX], batch[sb.T]
    order = np.lexsort((t, agent, eps))
    keys = set(zip(eps.tolist(), agent.tolist()))
    for e, a in keys:
        rows = order[(eps[order] == e) & (agent[order] == a)]
        np.testing.assert_array_equal(batch[COUNT][rows], np.arange(len(rows)))  # fresh at the start, +1 per own step
        assert np.all(np.diff(t[rows]) == step)  # the state advanced only at the agent's own steps
        np.testing.assert_array_equal(batch[sb.EPISODE_START][rows], np.arange(len(rows)) == 0)
        np.testing.assert_array_equal(batch[OWNER][rows], np.r_[-1, np.full(len(rows) - 1, a)])  # never another's
    return len(keys)


def _concat(batches: list[MultiAgentBatch]) -> sb.SampleBatch:
    return sb.SampleBatch.concat([b["default_policy"] for b in batches])


def test_state_is_per_agent_per_env_copy_reset_at_episode_start_and_carried_across_fragment_cuts():
    runner = EnvRunner(_config())
    batches = [runner.sample() for _ in range(12)]  # 5-step fragments of episodes up to 12 steps long
    batch = _concat(batches)
    assert all(name in batch for name in (sb.EPISODE_START, COUNT, OWNER))
    assert batch[COUNT].dtype == np.int64 and batch[sb.EPISODE_START].dtype == np.bool_
    pieces = _check_counts(batch, step=1)
    assert pieces > 3 * 3 * 4  # many episodes of every agent, in every env copy
    # episodes crossed fragment cuts (state carried) and agents lived for different lengths
    assert (batch[COUNT][batch[sb.T] == 0] == 0).all() and batch[COUNT].max() >= 6
    ended_early = batch[sb.TERMINATEDS] & (batch[sb.T] < 11)
    assert ended_early.any()
    assert len(set(zip(batch[sb.ENV_INDEX].tolist(), batch[sb.EPS_ID].tolist()))) == len(np.unique(batch[sb.EPS_ID]))


def test_state_advances_only_when_the_agent_acts_in_turn_based_envs():
    runner = EnvRunner(_config("pettingzoo.classic.connect_four_v3", rollout_fragment_length=7))
    batch = _concat([runner.sample() for _ in range(10)])
    assert len(np.unique(batch[sb.AGENT_INDEX])) == 2
    _check_counts(batch, step=2)  # the two players alternate: each state moves every other env step
    assert batch[COUNT].max() >= 4


def test_module_states_survive_save_and_restore(tmp_path):
    from marl.checkpoint.state_files import read_tree, write_tree

    reference = EnvRunner(_config())
    expected = [reference.sample() for _ in range(4)]
    runner = EnvRunner(_config())
    runner.sample()
    write_tree(runner.get_state(), tmp_path, "runner")  # checkpoints store it as JSON + arrays
    saved = read_tree(tmp_path, "runner")
    assert saved["module_states"]["default_policy"]  # mid-episode agents carry counts
    resumed = EnvRunner(_config())
    resumed.set_state(saved)
    for want in expected[1:]:
        got = resumed.sample()["default_policy"]
        for name, column in want["default_policy"].items():
            np.testing.assert_array_equal(got[name], column, err_msg=name)
        for name, table in want["default_policy"].tables.items():
            np.testing.assert_array_equal(got.tables[name], table, err_msg=name)


def test_evaluation_starts_every_agent_from_the_initial_state():
    runner = EnvRunner(_config())
    runner.sample()  # training episodes in progress
    StepCounter.seen, StepCounter.record = [], True
    try:
        episodes = runner.evaluate(4)
    finally:
        StepCounter.record = False
    assert len(episodes) == 4
    first = StepCounter.seen[: 3 * 3]  # the first step of every env copy's agents
    assert all(start and count == 0 for start, count in first)
    assert all(count == 0 for start, count in StepCounter.seen if start)
    assert all(count > 0 for start, count in StepCounter.seen if not start)


def test_stateless_modules_get_no_state_inputs_or_columns():
    runner = EnvRunner(_config().multi_agent(policies={"default_policy": {}}))
    seen = []
    module = runner.module["default_policy"]
    original = module.forward_exploration

    def spy(inputs):
        seen.append(set(inputs))
        return original(inputs)

    module.forward_exploration = spy
    batch = runner.sample()["default_policy"]
    assert all(keys == {"obs"} for keys in seen)
    assert not any(name.startswith(sb.STATE_IN) or name == sb.EPISODE_START for name in batch.keys())
    assert "module_states" not in runner.get_state()


class NoValueQ(QMLP):
    """A Q module that fails the test if anything asks it for values or passes it other inputs than obs."""

    passes = 0

    def forward_exploration(self, batch):
        assert set(batch) == {"obs"}
        NoValueQ.passes += 1
        return super().forward_exploration(batch)

    def forward_train(self, batch):
        raise AssertionError("DQN's runners must not run the train pass")


def test_dqn_runners_compute_no_values_or_log_probs(monkeypatch):
    from marl.modules.distributions import Categorical

    def no_logp(self, actions):
        raise AssertionError("DQN's runners must not compute log-probs")

    monkeypatch.setattr(Categorical, "logp", no_logp)
    cfg = (
        marl.DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8)
        .multi_agent(policies={"default_policy": {"module_class": NoValueQ}})
    )
    cfg.validate()
    runner = EnvRunner(cfg)
    NoValueQ.passes = 0
    batch = runner.sample()["default_policy"]
    assert NoValueQ.passes == 8  # one pass per step: no bootstrap pass at the fragment cut
    for name in (sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE, sb.STATE, sb.EPISODE_START):
        assert name not in batch
    # the transitions are whole: the cut rows' next_obs is the observation each env copy acts on next
    cut = batch[sb.SEGMENT_END] & ~batch[sb.TERMINATEDS]
    assert cut.sum() >= 2 and np.all(np.abs(batch[sb.NEXT_OBS][cut]).sum(-1) > 0)
    inside = ~batch[sb.SEGMENT_END]
    np.testing.assert_array_equal(batch[sb.NEXT_OBS][:-1][inside[:-1]], batch[sb.OBS][1:][inside[:-1]])


def test_requested_columns_are_checked():
    import pytest

    from marl.data.columns import check_columns

    with pytest.raises(ValueError, match="unknown sample column"):
        check_columns({"value_estimates"}, "p")
    with pytest.raises(ValueError, match="needs 'vf_preds'"):
        check_columns({sb.BOOTSTRAP_VALUE}, "p")
    assert marl.PPOConfig().columns_for("p") == {sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE}
    assert sb.STATE in marl.MAPPOConfig().columns_for("p")
    assert marl.DQNConfig().columns_for("p") == {sb.NEXT_OBS, sb.NEXT_ACTION_MASK}


class Forgetful(StepCounter):
    def forward_exploration(self, batch):
        return self.forward_train(batch)


class AsksForReward(StepCounter):
    inputs = ("obs", "reward")


def test_contract_breaches_name_the_policy_and_what_is_allowed():
    import pytest

    with pytest.raises(ValueError, match=r"declares unknown input\(s\) \['reward'\].*runners provide"):
        EnvRunner(_config().multi_agent(policies={"default_policy": {"module_class": AsksForReward}}))
    runner = EnvRunner(_config().multi_agent(policies={"default_policy": {"module_class": Forgetful}}))
    with pytest.raises(ValueError, match=r"policy 'default_policy': the module is stateful .* returned no state_out"):
        runner.sample()


def test_mixed_runs_record_each_policys_own_columns():
    from marl import load_scenario

    cfg = load_scenario("scenarios/simple_tag_mixed.yaml", [
        "env_runners.num_envs_per_env_runner=2", "env_runners.rollout_fragment_length=30",
    ])
    cfg.validate()
    batch = EnvRunner(cfg).sample()
    ppo, dqn = batch["predator"], batch["prey"]  # the episodes truncate at 25 steps: both kinds of piece ends
    assert {sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE} <= set(ppo.keys()) and sb.NEXT_OBS not in ppo
    assert sb.NEXT_OBS in dqn and not {sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE} & set(dqn.keys())
