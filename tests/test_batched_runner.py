"""The batched path (`BatchedEnvRunner` over a `BatchedEnv`) against the dict-API runner, on VMAS.

On the same seed both runners see the same worlds and draw the same actions, so their batches
must be equal row for row (once put in the same order): every column the algorithm asks for,
the global-state table, bootstrap values at truncations and cuts, next observations where worlds
auto-reset, episode ids and metrics.
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
from marl.connectors.learner import reverse_scan
from marl.data import sample_batch as sb
from marl.envs import EnvError
from marl.envs.swarm import Swarm
from marl.envs.vmas import VmasEnv
from marl.errors import ConfigError
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.group import EnvRunnerGroup
from marl.runners.runner_choice import runner_class
from marl.runners.vector_env_runner import VectorEnvRunner
from tests.bounds import HANG_S

pytest.importorskip("vmas")  # the vmas extra (CI installs it through dev)
ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)

CONTINUOUS_ONLY = {"MASAC", "MADDPG", "SAC"}


def config(algo: str = "PPO", worlds: int = 4, batched="auto", env="vmas.balance", fragment: int = 10,
           mapping=None, **env_config):
    env_config = {"max_steps": 7, **env_config}  # episodes end (and worlds auto-reset) inside fragments
    if env == "vmas.balance":
        env_config.setdefault("n_agents", 3)
    if algo in ("DQN", "QMIX", "VDN"):
        env_config.setdefault("continuous_actions", False)
    cfg = (getattr(marl, f"{algo}Config")().environment(env, env_config=env_config)
           .env_runners(num_envs_per_env_runner=worlds, rollout_fragment_length=fragment, batched=batched,
                        numpy_acting=False)  # the dict path's torch passes: the same numbers to the last bit
           .debugging(seed=0))
    if algo in ("PPO", "MAPPO"):
        cfg.training(train_batch_size=worlds * fragment * 3, minibatch_size=worlds * 3, num_epochs=1)
    if mapping is not None:
        cfg.multi_agent(policies=sorted(set(mapping.values())), policy_mapping=mapping)
    cfg.validate()
    return cfg


def samples(runner_cls, cfg, n: int = 3) -> list:
    runner = runner_cls(cfg, 0)
    try:
        return [runner.sample() for _ in range(n)]
    finally:
        runner.stop()


def canonical(batch: sb.SampleBatch) -> dict[str, np.ndarray]:
    """Every column in (episode, agent, step) order; table indices replaced by the rows they point at."""
    order = np.lexsort((batch[sb.T], batch[sb.AGENT_INDEX], batch[sb.EPS_ID]))
    out = {}
    for key in batch.keys():
        values = np.asarray(batch[key])[order]
        if key.endswith(".index"):
            values = batch.tables[key[: -len(".index")]][values]
        out[key] = values
    return out


def assert_same_samples(batched: list, dict_path: list) -> None:
    for b, d in zip(batched, dict_path):
        assert b.batch.env_steps == d.batch.env_steps
        assert sorted(b.batch.policy_batches) == sorted(d.batch.policy_batches)
        for pid, rows in b.batch.policy_batches.items():
            x, y = canonical(rows), canonical(d.batch.policy_batches[pid])
            assert sorted(x) == sorted(y), pid
            for key in x:
                assert x[key].shape == y[key].shape, (pid, key)
                np.testing.assert_allclose(x[key], y[key], rtol=0, atol=1e-6, err_msg=f"{pid} {key}")
        assert [(e["episode_id"], e["length"]) for e in b.episodes] == [(e["episode_id"], e["length"]) for e in d.episodes]
        np.testing.assert_allclose([e["return"] for e in b.episodes], [e["return"] for e in d.episodes], atol=1e-5)


@pytest.mark.parametrize("algo", ["PPO", "MAPPO", "DQN", "QMIX", "MASAC"])
@pytest.mark.parametrize("worlds", [1, 4])
def test_batched_batches_equal_the_dict_runners(algo, worlds):
    """Values, log-probs, global states and bootstraps (PPO, MAPPO), next observations and states (DQN, QMIX,
    MASAC), auto-reset worlds and fragment cuts: row for row what the dict-API runner records."""
    assert_same_samples(samples(BatchedEnvRunner, config(algo, worlds)),
                        samples(VectorEnvRunner, config(algo, worlds, batched=False)))


def test_agents_routed_to_several_policies_by_index():
    """The mapping becomes index lists once: each policy's rows are its agents' rows, as on the dict path."""
    mapping = {"agent_0": "lead", "*": "rest"}
    b = samples(BatchedEnvRunner, config("PPO", mapping=mapping))
    assert_same_samples(b, samples(VectorEnvRunner, config("PPO", batched=False, mapping=mapping)))
    rows = b[0].batch.policy_batches
    assert set(rows["lead"][sb.AGENT_INDEX].tolist()) == {0} and set(rows["rest"][sb.AGENT_INDEX].tolist()) == {1, 2}
    assert b[0].episodes[0]["policy_returns"].keys() == {"lead", "rest"}


def test_runner_choice():
    assert runner_class(config()) is BatchedEnvRunner  # vmas.* takes the batched path by default
    assert runner_class(config(batched=False)) is VectorEnvRunner
    recurrent = config()
    recurrent.training(model={"recurrent": "lstm"})
    assert runner_class(recurrent) is VectorEnvRunner  # auto: what the batched path does not run goes the dict way
    forced = config(batched=True)
    forced.training(model={"recurrent": "lstm"})
    with pytest.raises(ConfigError, match=r"env_runners.batched: true, but the batched path does not run .*recurrent"):
        runner_class(forced)


def test_evaluation_runs_whole_episodes_on_the_batched_path():
    runner = BatchedEnvRunner(config("PPO", worlds=4), 0)
    episodes = runner.evaluate(6)
    assert len(episodes) == 6 and all(e["length"] == 7 for e in episodes)
    assert sorted(e["episode_id"] - episodes[0]["episode_id"] for e in episodes) == list(range(6))
    steps = runner.run_evaluation(40, unit="env_steps")
    assert steps["env_steps"] >= 40
    runner.sample()  # training resumes with fresh episodes


def test_restore_starts_fresh_episodes_where_the_simulator_cannot_be_saved():
    runner = BatchedEnvRunner(config(), 0)
    runner.sample()
    state = runner.get_state()
    assert "batched" not in state  # VMAS worlds cannot be saved
    restored = BatchedEnvRunner(config(), 0)
    restored.set_state(state)
    batch = restored.sample()
    assert batch.batch.policy_batches["default_policy"][sb.EPS_ID].min() >= state["next_episode_id"]


def test_vmas_mpe_ports_and_max_steps(caplog):
    """VMAS's MPE ports are scenarios like any other; no max_steps: the documented default, said once."""
    with caplog.at_level("INFO", logger="marl.envs.vmas"):
        runner = BatchedEnvRunner(config("PPO", env="vmas.simple_spread", fragment=100).environment(
            "vmas.simple_spread", env_config={"continuous_actions": False}), 0)
    assert "sets no max_steps; episodes end after 100 steps" in caplog.text
    assert runner.env.action_space("agent_0").n == 9  # VMAS's discrete actions: a 3 x 3 grid of forces
    episodes = runner.sample().episodes
    assert episodes and {e["length"] for e in episodes} == {100}
    with pytest.raises(EnvError, match=r"environment.env_config.max_steps must be a positive integer or null, got 0"):
        BatchedEnvRunner(config("PPO", env="vmas.simple_spread", max_steps=0), 0)


def test_reverse_scan_of_many_chains_equals_the_loop():
    rng = np.random.default_rng(0)
    n = 40_000
    deltas = rng.normal(size=n).astype(np.float32)
    carry = np.full(n, 0.99 * 0.95, np.float32)
    carry[31::32] = 0.0  # chains of 32 (a fragment per world and agent) ...
    carry[rng.random(n) < 0.02] = 0.0  # ... cut early by episode ends
    expected = np.empty(n, np.float32)
    running = 0.0
    for i in range(n - 1, -1, -1):
        running = float(deltas[i]) + float(carry[i]) * running
        expected[i] = running
    np.testing.assert_array_equal(reverse_scan(deltas, carry), expected)


def test_marl_train_on_a_vmas_mpe_port(tmp_path):
    """`marl train` on vmas.simple_spread (refused before the batched path): the batched runner, metrics finite."""
    out = tmp_path / "run"
    p = run_cli("train", "--algo", "MAPPO", "--env", "vmas.simple_spread", "env_runners.num_envs_per_env_runner=32",
                "environment.env_config.max_steps=25", "training.train_batch_size=4800", "training.minibatch_size=1200",
                "stop.iterations=2", "--output", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    results = [json.loads(line) for line in (out / "result.jsonl").read_text().splitlines()]
    assert len(results) == 2 and results[-1]["env_steps_total"] == 2 * 1600
    assert all(np.isfinite(r["episode_return_mean"]) and r["episode_len_mean"] == 25 for r in results)


def test_the_runner_group_builds_batched_runners():
    group = EnvRunnerGroup(config())
    assert isinstance(group.local, BatchedEnvRunner)
    group.stop()


@pytest.mark.slow
def test_every_vmas_scenario_trains_an_iteration_on_the_batched_path():
    """Every scenario `vmas.make_env` loads (VMAS's own, MPE ports, debug) builds and trains one iteration."""
    import vmas

    from marl.envs.vmas import known_scenarios

    failures = []
    for name in known_scenarios(vmas):
        try:
            agents = VmasEnv(f"vmas.{name}", {"max_steps": 5}, 1, 0).agents
            algo = (marl.PPOConfig().environment(f"vmas.{name}", env_config={"max_steps": 5})
                    .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=5)
                    .multi_agent(policies=agents)  # a policy per agent: agents of some scenarios differ in spaces
                    .training(train_batch_size=10 * len(agents), minibatch_size=10, num_epochs=1)
                    .debugging(seed=0).build())
            assert isinstance(algo.runners.local, BatchedEnvRunner), name
            result = algo.train()
            assert result["env_steps_total"] == 10 and result["episodes_total"] >= 2, (name, result["env_steps_total"])
            algo.stop()
        except Exception as err:  # collect them all: one run names every scenario that fails
            failures.append(f"{name}: {type(err).__name__}: {err}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["PPO", "MAPPO"])
def test_ppo_and_mappo_learn_vmas_simple_spread_on_the_batched_path(tmp_path, algo):
    """500k env steps of the shipped scenario (about 30 s here): the team beats a random one by a margin.

    A random team scores about -430 per episode (the first iterations); both reach about -370 by
    500k env steps; a learner that does not learn stays within noise of -430 (iterations vary by ~15)."""
    out = tmp_path / "run"
    p = run_cli("train", "scenarios/vmas_simple_spread_ppo.yaml", f"algo={algo}", "stop.env_steps_total=500000",
                "--output", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    returns = [json.loads(line)["episode_return_mean"] for line in (out / "result.jsonl").read_text().splitlines()]
    assert np.mean(returns[:2]) < -415, returns  # the yardstick: what a random team scores
    assert np.mean(returns[-3:]) > -395, returns


def test_batched_runner_actors_overlap_and_checkpoint_resume(ray_session, tmp_path):
    """A Ray runner actor on the batched path, overlapped with the learner; a checkpoint resumes the run
    (its runner starts fresh episodes: VMAS worlds cannot be saved) and the counters go on. One actor a build:
    each actor start imports torch, marl and VMAS (10-30 s on a loaded machine); a second shows nothing more."""
    cfg = config("PPO", worlds=8, fragment=10)
    cfg.env_runners(num_env_runners=1, overlap=True)
    cfg.validate()
    algo = cfg.build()
    first = algo.train()
    assert first["env_steps_total"] > 0 and np.isfinite(first["losses/default_policy/policy_loss"])
    path = algo.save(tmp_path / "ckpt")
    steps = algo.train()["env_steps_total"]
    algo.stop()
    restored = marl.Algorithm.from_checkpoint(path)
    again = restored.train()
    assert again["env_steps_total"] == steps  # the same count as the run that went on from the checkpoint
    assert np.isfinite(again["episode_return_mean"])
    restored.stop()


def test_device_is_checked_when_set():
    with pytest.raises(ConfigError, match=r"'env_runners.device' must be a torch device such as cpu, cuda or cuda:1"):
        marl.PPOConfig().env_runners(device="gpu0")
    if not __import__("torch").cuda.is_available():
        with pytest.raises(ConfigError, match=r"'env_runners.device' names a CUDA device, but torch sees no GPU here"):
            marl.PPOConfig().env_runners(device="cuda")
    with pytest.raises(ConfigError, match=r"'env_runners.batched' must be one of \['auto', True, False\], got 'yes'"):
        marl.PPOConfig().env_runners(batched="yes")


def swarm_config(stacked: bool, mapping=None, n: int = 4):
    marl.register_batched_env(f"swarm_{stacked}", lambda env_config, worlds, seed, device: Swarm(
        worlds, n=n, max_steps=6, seed=seed, stacked=stacked))
    cfg = (marl.PPOConfig().environment(f"swarm_{stacked}")
           .env_runners(num_envs_per_env_runner=5, rollout_fragment_length=8, batched=True)
           .training(train_batch_size=5 * 8 * n).debugging(seed=0))
    if mapping is not None:
        cfg.multi_agent(policies=sorted(set(mapping.values())), policy_mapping=mapping)
    cfg.validate()
    return cfg


@pytest.mark.parametrize("mapping", [None, {"agent_1": "odd", "agent_3": "odd", "*": "even"}])
def test_a_stacked_env_gives_the_batches_of_its_per_agent_form(mapping):
    """BatchedEnv.stacked ([worlds, agents, ...] tensors, no object per agent) changes nothing in the rows,
    also when the agents of several policies interleave (their columns gathered and scattered by index)."""
    stacked = samples(BatchedEnvRunner, swarm_config(True, mapping))
    assert_same_samples(stacked, samples(BatchedEnvRunner, swarm_config(False, mapping)))
    if mapping is not None:
        assert set(stacked[0].batch.policy_batches["odd"][sb.AGENT_INDEX].tolist()) == {1, 3}


def test_a_registered_batched_env_must_make_what_it_promises():
    marl.register_batched_env("not_batched", lambda env_config, worlds, seed, device: object())
    cfg = (marl.PPOConfig().environment("not_batched").env_runners(batched=True))
    with pytest.raises(EnvError, match=r"the creator registered for batched env 'not_batched' must return a "
                                       r"marl.envs.batched.BatchedEnv of 8 worlds; got object"):
        BatchedEnvRunner(cfg, 0)


@pytest.mark.parametrize("stacked", [True, False])
def test_exact_resume_where_the_simulator_can_be_saved(stacked):
    """A simulator with get_state/set_state (the swarm) resumes mid-episode exactly: the restored runner's
    next fragments equal those the saved one went on to sample."""
    cfg = swarm_config(stacked)
    runner = BatchedEnvRunner(cfg, 0)
    runner.sample()
    state = runner.get_state()
    assert "batched" in state and state["batched"]["ep_len"].max() > 0  # saved mid-episode
    went_on = [runner.sample() for _ in range(2)]
    restored = BatchedEnvRunner(cfg, 0)
    restored.set_state(state)
    assert_same_samples([restored.sample() for _ in range(2)], went_on)


@pytest.mark.parametrize("algo", ["PPO", "MAPPO"])
@pytest.mark.parametrize("batched", ["auto", False])
def test_a_user_batched_env_trains_through_build_on_either_path(algo, batched):
    """A name given only to register_batched_env builds and trains: the config checks probe its world 0 through
    make_env (single_world), the batched path steps all its worlds, the dict path steps one-world views. MAPPO's
    critic reads the state the ended worlds reached, which the swarm leaves to the default (observations joined)."""
    marl.register_batched_env("user_swarm", lambda env_config, worlds, seed, device: Swarm(
        worlds, n=3, max_steps=6, seed=seed or 0))
    built = (getattr(marl, f"{algo}Config")().environment("user_swarm")
             .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=8, batched=batched)
             .training(train_batch_size=4 * 8 * 3).debugging(seed=0).build())
    try:
        runner = type(built.runners.local).__name__
        result = built.train()
    finally:
        built.stop()
    assert runner == ("BatchedEnvRunner" if batched == "auto" else "EnvRunner")
    assert result["env_steps_total"] >= 32 and np.isfinite(result["episode_return_mean"])


class OwnStateSwarm(Swarm):
    """A swarm whose global state is its own (not the observations joined) but whose step gives no final_state."""

    def state(self, obs=None):
        return torch.zeros((self.num_worlds, 5))


def test_an_own_state_without_final_state_is_one_line():
    marl.register_batched_env("own_state_swarm", lambda env_config, worlds, seed, device: OwnStateSwarm(
        worlds, n=3, max_steps=4, seed=seed or 0))
    cfg = (marl.MAPPOConfig().environment("own_state_swarm")
           .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=8, batched=True))
    runner = BatchedEnvRunner(cfg, 0)
    with pytest.raises(EnvError, match=r"^env 'own_state_swarm' defines its own state\(\) but its step gave no "
                                       r"final_state where worlds ended: return the state they reached in "
                                       r"BatchedStep.final_state$"):
        runner.sample()


@pytest.mark.parametrize("name,kind", [("wrapped_swarm", "batched envs"), ("vmas.balance", "VMAS scenarios")])
def test_families_marl_makes_take_auto_but_refuse_a_wrapper_list_in_one_line(name, kind):
    marl.register_batched_env("wrapped_swarm", lambda env_config, worlds, seed, device: Swarm(worlds, n=2, seed=seed or 0))
    assert marl.make_env(name, {}, "auto").possible_agents  # auto: nothing to wrap
    with pytest.raises(EnvError, match=rf"^env '{name}': 'environment.wrappers' \(SuperSuit\) do not apply to {kind}$"):
        marl.make_env(name, {}, ["color_reduction_v0"])
