"""The batched adapters beyond VMAS: JaxMARL envs (`jaxmarl.<id>`), their one-world dict view, Gymnasium vector envs.

jaxmarl comes with the `envs` extra (CI installs it through `dev`): these tests do not skip without it.
Each JaxMARL env compiles once per (env, kwargs, worlds) in a process (10-20 s here), so the tests share
configurations.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.envs import EnvError, make_env
from marl.envs.batched_view import single_world
from marl.envs.gym_vector import GymVectorEnv
from marl.envs.jaxmarl import JaxMarlEnv
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.jax_rollout import CompiledRolloutRunner
from marl.runners.runner_choice import runner_class
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
MPE = "jaxmarl.MPE_simple_spread_v3"
SMAX = "jaxmarl.HeuristicEnemySMAX"
MPE_STEPS = 6  # env_config max_steps: JaxMARL's MPE ends an episode after max_steps + 1 steps (its `step >= max`)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_S)


def config(env=MPE, env_config=None, worlds=4, fragment=16, batched="auto", agents=3):
    env_config = {"max_steps": MPE_STEPS} if env_config is None else env_config
    cfg = (marl.PPOConfig().environment(env, env_config=env_config)
           .env_runners(num_envs_per_env_runner=worlds, rollout_fragment_length=fragment, batched=batched)
           .training(train_batch_size=worlds * fragment * agents, minibatch_size=worlds * 4, num_epochs=1)  # agent steps
           .debugging(seed=0))
    cfg.validate()
    return cfg


def assert_lengths_match_rows(batch, num_agents: int) -> int:
    """Each finished episode that started inside the fragment (a row with t = 0) has `length` rows per agent."""
    rows = batch.batch.policy_batches["default_policy"]
    checked = 0
    for e in batch.episodes:
        mine = rows[sb.EPS_ID] == e["episode_id"]
        if rows[sb.T][mine].min() == 0:
            assert mine.sum() == num_agents * e["length"], e
            checked += 1
    return checked


def test_mpe_samples_through_the_batched_runner():
    cfg = config()
    assert runner_class(cfg) is CompiledRolloutRunner  # jaxmarl.* takes the batched path (its compiled rollout) by default
    runner = runner_class(cfg)(cfg, 0)
    try:
        batch = runner.sample()
    finally:
        runner.stop()
    rows = batch.batch.policy_batches["default_policy"]
    assert len(rows[sb.OBS]) == 16 * 4 * 3 and rows[sb.OBS].shape[1] == 18
    assert np.isfinite(rows[sb.REWARDS]).all() and np.abs(rows[sb.REWARDS]).sum() > 0
    assert len(batch.episodes) == 8 and {e["length"] for e in batch.episodes} == {MPE_STEPS + 1}
    assert assert_lengths_match_rows(batch, 3) == 8
    # JaxMARL's MPE ends at its step limit: truncation (values bootstrap), never termination
    assert rows[sb.TRUNCATEDS].sum() == 8 * 3 and rows[sb.TERMINATEDS].sum() == 0


def test_smax_masks_world_state_and_episode_ends():
    cfg = config(SMAX, {"scenario": "3m"}, fragment=60)
    runner = runner_class(cfg)(cfg, 0)
    try:
        assert runner.masked and runner.env.state().shape == (4, runner.env.packed_columns["state"].stop
                                                              - runner.env.packed_columns["state"].start)
        batch = runner.sample()
    finally:
        runner.stop()
    rows = batch.batch.policy_batches["default_policy"].to_numpy()
    mask, actions = rows[sb.ACTION_MASK], rows[sb.ACTIONS].astype(int)
    assert mask.shape == (60 * 4 * 3, 8) and (mask[np.arange(len(actions)), actions] == 1).all()
    assert (mask.sum(1) < 8).any()  # some actions are illegal (attacks out of range, dead units)
    assert np.isfinite(rows[sb.REWARDS]).all()
    assert batch.episodes and all(1 <= e["length"] <= 101 for e in batch.episodes)
    assert assert_lengths_match_rows(batch, 3) == len(batch.episodes)  # 60 steps: each ended episode started inside


def resumes_exactly(cfg, keys=None) -> tuple:
    """A runner's state saved after one fragment, restored into a new runner with the same weights: its next three
    fragments equal the original's (`keys`, or every column) and so do their episodes' returns.
    Returns (the state, the original runner, its three fragments after the save)."""
    first = runner_class(cfg)(cfg, 0)
    first.sample()
    state = first.get_state()
    assert "batched" in state and (state["batched"]["ep_len"] > 0).all()
    expected = [first.sample() for _ in range(3)]
    restored = runner_class(cfg)(cfg, 0)
    restored.set_weights({"version": 1, "modules": first.module.get_state()})
    restored.set_state(state)
    got = [restored.sample() for _ in range(3)]
    for a, b in zip(expected, got):
        x, y = a.batch.policy_batches["default_policy"], b.batch.policy_batches["default_policy"]
        for key in keys or x.keys():
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)
        assert [e["return"] for e in a.episodes] == [e["return"] for e in b.episodes]
    return state, first, expected


def test_runner_resumes_exactly_from_a_saved_jaxmarl_state():
    """get_state mid-episode (after 5 steps: no SMAX battle is over yet): a new runner continues with the same samples."""
    resumes_exactly(config(SMAX, {"scenario": "3m"}, fragment=5),
                    (sb.OBS, sb.ACTIONS, sb.REWARDS, sb.ACTION_MASK, sb.EPS_ID, sb.TERMINATEDS))


def test_single_world_view_matches_the_batched_env():
    batched = JaxMarlEnv(MPE, {"max_steps": MPE_STEPS}, 1, seed=3)
    view = single_world(JaxMarlEnv(MPE, {"max_steps": MPE_STEPS}, 1, seed=3))
    rng = np.random.default_rng(0)
    obs = batched.reset()
    view_obs, _ = view.reset()
    for t in range(3 * (MPE_STEPS + 1)):
        np.testing.assert_array_equal(view_obs["agent_0"], obs["agent_0"][0].numpy())
        actions = {a: int(rng.integers(5)) for a in batched.agents}
        out = batched.step({a: torch.tensor([v]) for a, v in actions.items()})
        view_obs, rewards, terms, truncs, _ = view.step(actions)
        assert rewards == {a: float(out.rewards[a][0]) for a in batched.agents}
        assert truncs["__all__"] == bool(out.done[0]) == ((t + 1) % (MPE_STEPS + 1) == 0)
        obs = out.obs
        if truncs["__all__"]:
            np.testing.assert_array_equal(view_obs["agent_1"], out.final_obs["agent_1"][0].numpy())
            np.testing.assert_array_equal(view.state(), out.final_state[0].numpy())
            view_obs, _ = view.reset()  # hands out the auto-reset observation


@pytest.mark.parametrize("env,env_config", [(MPE, {"max_steps": MPE_STEPS}), (SMAX, {"scenario": "3m"})])
def test_stacked_form_hands_out_the_per_agent_numbers(env, env_config):
    """stack=True (what the runner asks for): one [W, N, ...] view per step, the same numbers as the per-agent dicts."""
    per_agent, stacked = JaxMarlEnv(env, env_config, 4, seed=1), JaxMarlEnv(env, env_config, 4, seed=1, stack=True)
    assert stacked.stacked and not per_agent.stacked
    agents = per_agent.agents
    joined = lambda d: torch.stack([d[a] for a in agents], dim=1)  # noqa: E731
    np.testing.assert_array_equal(joined(per_agent.reset()).numpy(), stacked.reset().numpy())
    gen, ended = torch.Generator().manual_seed(0), 0
    for _ in range(2 * (MPE_STEPS + 1)):
        masks = stacked.action_masks()
        if masks is not None:
            np.testing.assert_array_equal(joined(per_agent.action_masks()).numpy(), masks.numpy())
            actions = torch.multinomial(masks.reshape(-1, masks.shape[-1]), 1, generator=gen).view(4, len(agents))
        else:
            actions = torch.randint(5, (4, len(agents)), generator=gen)
        a, b = per_agent.step(dict(zip(agents, actions.unbind(1)))), stacked.step(actions)
        for x, y in ((a.obs, b.obs), (a.rewards, b.rewards)):
            np.testing.assert_array_equal(joined(x).numpy(), y.numpy())
        assert torch.equal(a.terminated, b.terminated) and torch.equal(a.truncated, b.truncated)
        assert (a.final_obs is None) == (b.final_obs is None)
        if b.final_obs is not None:
            ended += 1
            np.testing.assert_array_equal(joined(a.final_obs).numpy(), b.final_obs.numpy())
            np.testing.assert_array_equal(a.final_state.numpy(), b.final_state.numpy())
        np.testing.assert_array_equal(per_agent.state().numpy(), stacked.state().numpy())
    assert env == SMAX or ended == 2  # MPE: two episode ends compared


def test_make_env_views_and_bad_input():
    smax = make_env(SMAX, {"scenario": "3m"})
    assert smax.observation_space("ally_0")["action_mask"].shape == (8,)  # PettingZoo's masked Dict convention
    obs, _ = smax.reset()
    assert obs["ally_0"]["action_mask"].dtype == np.int8 and smax.state().ndim == 1
    with pytest.raises(EnvError, match=r"did you mean jaxmarl.MPE_simple_spread_v3"):
        make_env("jaxmarl.MPE_simple_sprad_v3")
    with pytest.raises(EnvError, match=r"does not take \(n_agnts\)"):
        make_env(MPE, {"n_agnts": 3})


def test_marl_train_on_jaxmarl_through_the_cli(tmp_path):
    out = tmp_path / "run"
    p = run_cli("train", "--algo", "PPO", "--env", MPE, "env_runners.num_envs_per_env_runner=16", "stop.iterations=1",
                "--output", str(out), "--quiet")
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads((out / "result.jsonl").read_text().splitlines()[-1])
    assert result["env_steps_total"] > 0 and np.isfinite(result["episode_return_mean"])


def test_cartpole_on_the_batched_path_through_gymnasium_vector_envs():
    cfg = config("CartPole-v1", {}, worlds=8, fragment=64, batched=True, agents=1)
    assert runner_class(cfg) is BatchedEnvRunner
    runner = runner_class(cfg)(cfg, 0)
    assert isinstance(runner.env, GymVectorEnv)
    batch = runner.sample()
    runner.stop()
    rows = batch.batch.policy_batches["default_policy"]
    assert len(rows[sb.OBS]) == 8 * 64 and batch.episodes
    assert assert_lengths_match_rows(batch, 1) == len(batch.episodes)
    assert all(e["return"] == e["length"] for e in batch.episodes)  # CartPole: reward 1 per step
    cfg.training(train_batch_size=8 * 64 * 2, minibatch_size=128, num_epochs=2)
    algo = cfg.build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["env_steps_total"] == 8 * 64 * 2 and np.isfinite(result["losses/default_policy/policy_loss"])


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["PPO", "MAPPO"])
def test_ppo_and_mappo_learn_smax_3m(tmp_path, algo):
    """100k env steps of the shipped SMAX scenario (about 45 s here, 30 of them compiling SMAX): the marines beat
    a random team by a wide margin.

    A random team (the first iteration's near-uniform policy over the legal actions) scores about 0.55 per
    episode; PPO reaches about 2.5 and MAPPO about 3.5 by 100k env steps; with lr 0 the return stays at 0.5-0.6."""
    out = tmp_path / "run"
    p = run_cli("train", "scenarios/smax_3m_mappo.yaml", f"algo={algo}", "stop.env_steps_total=100000",
                "--output", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    returns = [json.loads(line)["episode_return_mean"] for line in (out / "result.jsonl").read_text().splitlines()]
    assert returns[0] < 0.8, returns  # the yardstick: what a random team scores
    assert np.mean(returns[-3:]) > 2.0, returns


def test_gymnasium_vector_env_bad_input():
    with pytest.raises(EnvError, match=r"rejected env_config key\(s\) \['bogus'\]"):
        GymVectorEnv("CartPole-v1", {"bogus": 1}, 2)


# -- JaxMARL envs whose outputs are not one dict entry per alike agent ------------------------------------------
def test_agents_with_unlike_action_shapes_step_through_the_adapter():
    """simple_world_comm's leader acts in Box(9), the others in Box(5): each agent's action reaches its own slot."""
    env = JaxMarlEnv("jaxmarl.MPE_simple_world_comm_v3", {}, 2, seed=0, stack=True)
    assert not env.stacked and env.action_space("leadadversary_0").shape == (9,)
    env.reset(seed=0)
    actions = {a: torch.rand(2, *env.action_space(a).shape) for a in env.agents}
    step = env.step(actions)
    assert set(step.rewards) == set(env.agents) and all(r.shape == (2,) for r in step.rewards.values())


def test_agent_arrays_are_split_per_world_not_across_worlds():
    """STORM's storm_np hands out observations and rewards as [agents, ...] arrays (agents 0 and 1): each world's
    agent i view is that world's row i, as JaxMARL's own vmapped reset gives it."""
    import jax

    env = JaxMarlEnv("jaxmarl.storm_np", {}, 3, seed=0, stack=True)
    obs = env.reset(seed=5)
    key = jax.random.split(jax.random.PRNGKey(5))[1]  # the adapter's reset: split off one key, one per world
    expected = np.asarray(jax.vmap(env.env.reset)(jax.random.split(key, 3))[0])  # [W, agents, 5, 5, 14]
    assert obs.shape == (3, 2, 5, 5, 14)
    np.testing.assert_array_equal(obs.numpy(), expected)
    step = env.step(torch.zeros((3, 2), dtype=torch.int64))
    assert step.rewards.shape == (3, 2)


def test_dict_world_states_are_joined_and_hanabi_gets_its_legal_moves_as_masks():
    facmac = JaxMarlEnv("jaxmarl.MPE_simple_facmac_3a_v1", {}, 2, seed=0, stack=True)
    import jax

    obs = facmac.reset(seed=0)  # its get_world_state gives one entry per agent: joined in agent order
    parts = jax.eval_shape(lambda k: facmac.env.get_world_state(facmac.env.reset(k)[1]), jax.random.PRNGKey(0))
    assert isinstance(parts, dict) and facmac.state(obs).shape == (2, sum(int(np.prod(p.shape)) for p in parts.values()))
    hanabi = JaxMarlEnv("jaxmarl.hanabi", {}, 2, seed=0, stack=True)
    hanabi.reset(seed=0)
    masks = hanabi.action_masks()
    assert masks.shape == (2, 2, hanabi.action_space("agent_0").n)
    off_turn = masks.sum(-1) == 1  # the player not on turn may only pass (the last action)
    assert bool((off_turn.sum(1) == 1).all()) and bool(masks[off_turn][:, -1].all())


def test_jaxmarl_ids_marl_cannot_make_say_why_in_one_line():
    with pytest.raises(EnvError, match=r"LearnedPolicyEnemySMAX.*rejected"):
        make_env("jaxmarl.LearnedPolicyEnemySMAX")
    import importlib.util

    if importlib.util.find_spec("brax") is None:  # JaxMARL's MABrax envs need brax (jaxmarl[mabrax])
        with pytest.raises(EnvError, match=r"jaxmarl.ant_4x2.*brax"):
            make_env("jaxmarl.ant_4x2")
    p = run_cli("envs", "--family", "jaxmarl")
    assert p.returncode == 0 and "jaxmarl.MPE_simple_spread_v3" in p.stdout and "jaxmarl.hanabi" in p.stdout
