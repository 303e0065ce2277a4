"""Checkpoints: layout without pickle, exact resume (in this process and a new one), atomic saves, schema versions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import marl
from marl.checkpoint.state_files import StateFileError, read_tree, write_tree
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def cartpole_config(seed=3):
    return (
        marl.PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=64, observation_filter="mean_std")
        .training(train_batch_size=128, minibatch_size=64, num_epochs=2)
        .debugging(seed=seed)
    )


def weights_of(algo):
    return algo.get_weights()["modules"]


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for pid in a:
        assert a[pid].keys() == b[pid].keys()
        for key in a[pid]:
            np.testing.assert_array_equal(a[pid][key], b[pid][key], err_msg=f"{pid}/{key}")


# -- state trees ------------------------------------------------------------------------
def test_state_tree_round_trips_types_and_bits(tmp_path):
    opt = torch.optim.Adam([torch.nn.Parameter(torch.randn(40, 30))], lr=1e-3)
    opt.zero_grad()
    opt.param_groups[0]["params"][0].sum().backward()
    opt.step()
    tree = {
        "optimizer": opt.state_dict(),  # int keys, tuples (betas), 0-dim tensors, large tensors
        "numpy_global": np.random.get_state(),  # tuple with a uint32 array
        "generator": np.random.default_rng(5).bit_generator.state,  # 128-bit Python ints
        "python": __import__("random").getstate(),
        "floats": [0.1, float("inf"), 1e-300, -0.0],
        "scalar": np.float32(0.3),
        "big": np.arange(1000, dtype=np.float64) / 7,
        "__odd_key": {1: "one", (2, 3): "tuple"},
    }
    write_tree(tree, tmp_path, "t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.safetensors"]
    back = read_tree(tmp_path, "t")
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    state = back["optimizer"]["state"][0]
    ref = opt.state_dict()["state"][0]
    for key in ref:
        assert torch.equal(state[key], ref[key]) and state[key].dtype == ref[key].dtype
    assert back["numpy_global"][0] == "MT19937" and np.array_equal(back["numpy_global"][1], tree["numpy_global"][1])
    assert back["generator"] == tree["generator"]
    assert back["python"] == tree["python"]
    assert back["floats"][:3] == [0.1, float("inf"), 1e-300] and str(back["floats"][3]) == "-0.0"
    assert back["scalar"].dtype == np.float32 and back["scalar"] == np.float32(0.3)
    assert np.array_equal(back["big"], tree["big"])
    assert back["__odd_key"] == {1: "one", (2, 3): "tuple"}
    np.random.set_state(back["numpy_global"])  # the decoded state is usable as is


def test_state_tree_refuses_objects_it_would_have_to_pickle(tmp_path):
    with pytest.raises(StateFileError, match=r"at 'a\.b'.*no pickled objects"):
        write_tree({"a": {"b": object()}}, tmp_path, "t")


# -- layout ---------------------------------------------------------------------------------
def tag_config():
    return (
        marl.load_scenario("scenarios/simple_tag_ppo.yaml")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=30)
        .training(train_batch_size=240, minibatch_size=60, num_epochs=1)  # agent steps: 60 env steps x 4 agents
        .debugging(seed=1)
    )


def test_checkpoint_layout_has_no_pickle_and_a_complete_manifest(tmp_path):
    algo = tag_config().build()
    try:
        algo.train()
        path = Path(algo.save(tmp_path / "ckpt"))
    finally:
        algo.stop()
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    assert all(f.endswith((".json", ".safetensors")) for f in files), files
    assert "policies/predator.safetensors" in files and "policies/prey.safetensors" in files
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["schema_version"] == 2 and manifest["marl_version"] == marl.__version__
    assert manifest["algo"] == "PPO" and manifest["iteration"] == 1
    assert manifest["config"]["multi_agent"]["policy_mapping"] == {"adversary_*": "predator", "*": "prey"}
    assert manifest["config"]["training"]["train_batch_size"] == 240  # the resolved config
    assert manifest["policies"]["predator"]["observation_space"]["shape"] == [16]
    learner = read_tree(path / "learner", "state")
    assert set(learner) >= {"weights", "optimizers", "rng"}
    assert set(learner["optimizers"]) == {"predator", "prey"}
    algorithm = read_tree(path, "algorithm")
    assert algorithm["counters"]["env_steps_sampled"] == 60 and set(algorithm["rng"]) == {"python", "numpy", "torch"}
    assert manifest["extra"] == {"report": "report", "workflow/sync_weights": "workflow_sync_weights"}
    runner = read_tree(path / "runners", "0")
    assert len(runner["envs"]) == 2
    assert "rng" in runner["envs"][0]["start"]  # the second episode (25 steps each) began from the env's generator state
    assert not list(tmp_path.glob(".ckpt*")), "no temporary or old directory is left behind"


def test_load_module_gives_the_policy_for_inference(tmp_path):
    algo = tag_config().build()
    try:
        algo.train()
        algo.save(tmp_path / "ckpt")
        expected = algo.get_weights()["modules"]["prey"]
        obs = torch.randn(5, 14)
        reference = algo.learners.local.module["prey"].forward_inference({"obs": obs})["action_dist_inputs"]
    finally:
        algo.stop()
    module = marl.load_module(tmp_path / "ckpt", "prey")
    assert isinstance(module, marl.RLModule) and not module.training
    for key, value in module.get_state().items():
        np.testing.assert_array_equal(value, expected[key])
    assert torch.equal(module.forward_inference({"obs": obs})["action_dist_inputs"], reference)
    with pytest.raises(marl.CheckpointError, match=r"no policy 'wolf'.*\['predator', 'prey'\]"):
        marl.load_module(tmp_path / "ckpt", "wolf")


def test_observation_filter_state_is_saved(tmp_path):
    algo = cartpole_config().build()
    try:
        algo.train()
        algo.save(tmp_path / "ckpt")
        expected = algo.get_weights()["connectors"]["default_policy"]["mean_std"]
    finally:
        algo.stop()
    saved = marl.algorithms.load_connector_state(tmp_path / "ckpt")
    assert saved["count"] == expected["count"] == 128.0
    np.testing.assert_array_equal(saved["mean"], expected["mean"])
    np.testing.assert_array_equal(saved["m2"], expected["m2"])


# -- exact resume ---------------------------------------------------------------------------
def test_restore_in_this_process_continues_bit_identically(tmp_path):
    algo = cartpole_config().evaluation(evaluation_interval=2, evaluation_duration=2, evaluation_explore=True).build()
    try:
        for _ in range(3):
            algo.train()
        algo.save(tmp_path / "ckpt")
        straight = [algo.train() for _ in range(3)]
        straight_weights = weights_of(algo)
        algo.restore(tmp_path / "ckpt")
        assert algo.iteration == 3
        resumed = [algo.train() for _ in range(3)]
        assert_same_weights(straight_weights, weights_of(algo))
    finally:
        algo.stop()
    for a, b in zip(straight, resumed):
        for key in ("iteration", "env_steps_total", "episodes_total", "episode_return_mean", "losses/default_policy/policy_loss",
                    "evaluation/episode_return_mean"):
            assert a.get(key) == b.get(key), key


def test_a_restored_run_trains_with_the_new_configs_learning_rate(tmp_path):
    """Optimiser moments come back from the checkpoint; lr is the resuming config's (`--resume ... training.lr=X`)."""
    algo = cartpole_config().build()
    try:
        algo.train()
        optimizer = algo.learners.local.optimizers["default_policy"]["default"]
        moments = {k: v.clone() for k, v in optimizer.state[0].items()}
        algo.save(tmp_path / "ckpt")
    finally:
        algo.stop()
    resumed = marl.Algorithm.from_checkpoint(tmp_path / "ckpt", overrides=["training.lr=0.0123"])
    try:
        optimizer = resumed.learners.local.optimizers["default_policy"]["default"]
        assert [g["lr"] for g in optimizer.param_groups] == [0.0123]
        for key, value in moments.items():
            torch.testing.assert_close(optimizer.state[0][key], value, rtol=0, atol=0)
    finally:
        resumed.stop()


RESUME_SCRIPT = """
import sys, numpy as np, marl
from safetensors.numpy import save_file
algo = marl.Algorithm.from_checkpoint(sys.argv[1])
try:
    for _ in range(int(sys.argv[2])):
        result = algo.train()
    weights = algo.get_weights()["modules"]
    save_file({f"{pid}/{k}": v for pid, s in weights.items() for k, v in s.items()}, sys.argv[3])
    print("RESULT", result["iteration"], result["env_steps_total"], repr(result["episode_return_mean"]))
finally:
    algo.stop()
"""


def resume_in_new_process(ckpt_dir, iterations, out):
    p = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, str(ckpt_dir), str(iterations), str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 0, p.stderr
    from safetensors.numpy import load_file

    flat = load_file(str(out))
    weights: dict = {}
    for key, value in flat.items():
        pid, name = key.split("/", 1)
        weights.setdefault(pid, {})[name] = value
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT"))
    return weights, line


def dqn_config():
    """DQN with everything that carries state across iterations: prioritised replay, a target network,
    a 1:4 round-robin join of the store and learn branches, weights synced every 4th update."""
    return (
        marl.DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8)
        .training(train_batch_size=16, training_intensity=4, num_steps_sampled_before_learning_starts=32,
                  min_env_steps_per_iteration=48, target_network_update_freq=40, prioritized_replay=True,
                  replay_capacity=1000, epsilon=[[0, 1.0], [200, 0.1]], model={"hiddens": [32, 32]})
        .debugging(seed=5)
    )


@pytest.mark.parametrize("make_config", [
    pytest.param(lambda: cartpole_config().evaluation(evaluation_interval=2, evaluation_duration=2), id="cartpole-filter-eval"),
    pytest.param(tag_config, id="simple_tag-two-policies"),
    pytest.param(dqn_config, id="dqn-prioritized-replay-target"),
])
def test_resume_in_a_new_process_matches_the_straight_run(tmp_path, make_config):
    n, extra = 2, 2
    algo = make_config().build()
    try:
        for _ in range(n):
            algo.train()
        algo.save(tmp_path / "ckpt")
        for _ in range(extra):
            result = algo.train()
        straight = weights_of(algo)
    finally:
        algo.stop()
    resumed, line = resume_in_new_process(tmp_path / "ckpt", extra, tmp_path / "resumed.safetensors")
    assert_same_weights(straight, resumed)
    assert line == f"RESULT {n + extra} {result['env_steps_total']} {result['episode_return_mean']!r}"


def test_resume_with_ray_runners_is_exact_too_and_restores_with_a_different_number_of_runners(tmp_path, ray_session):
    config = tag_config().env_runners(num_env_runners=2)
    algo = config.build()
    try:
        algo.train()
        algo.save(tmp_path / "ckpt")
        saved = weights_of(algo)
        algo.train()
        algo.train()
        straight = weights_of(algo)
    finally:
        algo.stop()
    algo = marl.Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        assert len(algo.runners.remote) == 2
        algo.train()
        algo.train()
        assert_same_weights(straight, weights_of(algo))
    finally:
        algo.stop()
    # The same checkpoint with one runner fewer: the weights come back, the new set of runners acts with them.
    algo = marl.Algorithm.from_checkpoint(tmp_path / "ckpt", overrides=["env_runners.num_env_runners=1"])
    try:
        assert len(algo.runners.remote) == 1 and algo.iteration == 1
        assert_same_weights(saved, weights_of(algo))
        versions = ray_session.get([a.get_weights_version.remote() for a in algo.runners.remote])
        assert versions == [algo.get_weights()["version"]]
        r = algo.train()
        # One runner now samples the whole 240-agent-step batch (fragments of 30 steps x 2 env copies x 4 agents).
        assert r["iteration"] == 2 and r["env_steps_total"] == 60 + 60
    finally:
        algo.stop()


def test_seeded_in_process_runs_are_reproducible_and_seeds_matter():
    def run(seed):
        algo = cartpole_config(seed).build()
        try:
            results = [algo.train() for _ in range(2)]
            return weights_of(algo), [r["episode_return_mean"] for r in results]
        finally:
            algo.stop()

    w1, r1 = run(7)
    w2, r2 = run(7)
    w3, _ = run(8)
    assert_same_weights(w1, w2)
    assert r1 == r2
    assert not np.array_equal(w1["default_policy"]["pi.0.weight"], w3["default_policy"]["pi.0.weight"])


def test_each_runner_and_env_copy_gets_its_own_seed():
    from marl.runners import EnvRunner

    config = cartpole_config()
    config.validate()
    first_obs = []
    for worker in (0, 1):
        runner = EnvRunner(config, worker)
        runner._start()
        first_obs += [runner._obs[k]["agent_0"] for k in range(runner.num_envs)]
    assert len({o.tobytes() for o in first_obs}) == 4
    again = EnvRunner(config, 1)
    again._start()
    np.testing.assert_array_equal(again._obs[0]["agent_0"], first_obs[2])
    restarted = EnvRunner(config, 1, incarnation=1)  # a replacement does not replay the dead runner's episodes
    restarted._start()
    assert restarted._obs[0]["agent_0"].tobytes() != first_obs[2].tobytes()


# -- extra state (replay buffers and the like) ------------------------------------------------
class Counter:
    def __init__(self):
        self.rows = np.zeros((300, 4), np.float32)
        self.n = 0

    def get_state(self):
        return {"rows": self.rows, "n": self.n}

    def set_state(self, state):
        self.rows, self.n = state["rows"], state["n"]


def test_registered_components_are_saved_restored_and_skippable(tmp_path):
    algo = tag_config().build()
    try:
        buffer = Counter()
        algo.register_checkpointable("replay/prey", buffer)
        buffer.rows[:] = np.random.default_rng(0).random((300, 4))
        buffer.n = 17
        algo.save(tmp_path / "full")
        algo.save(tmp_path / "lean", skip=["replay/"])
        expected = buffer.rows.copy()
        buffer.rows[:] = 0
        buffer.n = 0
        algo.restore(tmp_path / "full")
        assert buffer.n == 17 and np.array_equal(buffer.rows, expected)
        buffer.n = 5
        algo.restore(tmp_path / "lean")  # no state for it there: it keeps its own
        assert buffer.n == 5
        with pytest.raises(TypeError, match="get_state"):
            algo.register_checkpointable("bad", object())
    finally:
        algo.stop()
    assert (tmp_path / "full" / "extra" / "replay_prey.json").is_file()
    assert "replay/prey" not in json.loads((tmp_path / "lean" / "manifest.json").read_text())["extra"]


# -- schema versions ----------------------------------------------------------------------------
def write_v1_checkpoint(algo, path: Path):
    """The layout marl 0.1.0 wrote (schema 1): policy_<id>.safetensors, optimizers.pt, connectors in the manifest."""
    from safetensors.numpy import save_file

    path.mkdir()
    weights = algo.get_weights()
    for pid, state in weights["modules"].items():
        save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(path / f"policy_{pid}.safetensors"))
    # 0.1.0 kept one optimiser per policy: {pid: state_dict} (today's `default` group)
    optimizers = {pid: groups["default"] for pid, groups in algo.learners.get_optimizer_state().items()}
    torch.save(optimizers, path / "optimizers.pt")
    manifest = {
        "schema_version": 1, "marl_version": "0.1.0", "algo": "PPO", "config": algo.config.to_dict(),
        "iteration": algo.iteration, "weights_version": weights["version"], "counters": dict(algo.metrics.counters),
        "policies": list(weights["modules"]),
        "connectors": {pid: {k: np.asarray(v).tolist() for k, v in s["mean_std"].items()} for pid, s in weights["connectors"].items()},
    }
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_schema_1_checkpoint_loads_through_the_migration(tmp_path):
    algo = cartpole_config().build()
    try:
        algo.train()
        write_v1_checkpoint(algo, tmp_path / "v1")
        saved = weights_of(algo)
        saved_filter = algo.get_weights()["connectors"]["default_policy"]["mean_std"]
    finally:
        algo.stop()
    algo = marl.Algorithm.from_checkpoint(tmp_path / "v1")
    try:
        assert algo.iteration == 1 and algo.metrics.counters["env_steps_sampled"] == 128
        assert_same_weights(saved, weights_of(algo))
        np.testing.assert_array_equal(algo.get_weights()["connectors"]["default_policy"]["mean_std"]["mean"], saved_filter["mean"])
        assert algo.train()["iteration"] == 2
    finally:
        algo.stop()
    with pytest.raises(marl.CheckpointError, match="does not record the policies' spaces"):
        marl.load_module(tmp_path / "v1")


@pytest.mark.parametrize("version, pattern", [
    (3, r"schema version 3 \(written by marl 9\.0\).*reads schema versions 1 to 2: upgrade marl"),
    (0, r"schema version 0; this marl .* reads schema versions 1 to 2 and has no migration from 0"),
])
def test_unknown_schema_versions_are_named(tmp_path, version, pattern):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "manifest.json").write_text(json.dumps({"schema_version": version, "marl_version": "9.0"}))
    with pytest.raises(marl.CheckpointError, match=pattern):
        marl.Algorithm.from_checkpoint(tmp_path / "c")


def test_restore_into_another_algorithm_is_refused_clearly(tmp_path):
    algo = cartpole_config().build()
    try:
        algo.save(tmp_path / "ckpt")
    finally:
        algo.stop()
    other = tag_config().build()
    try:
        with pytest.raises(marl.CheckpointError, match=r"has policies \['default_policy'\].*\['predator', 'prey'\]"):
            other.restore(tmp_path / "ckpt")
    finally:
        other.stop()
    with pytest.raises(marl.CheckpointError, match="does not exist"):
        marl.Algorithm.from_checkpoint(tmp_path / "nothing")


# -- saves interrupted by a kill ------------------------------------------------------------------
KILL_SCRIPT = """
import os, sys, time, marl
from marl.checkpoint import directory as checkpoint
root, points = sys.argv[1], sys.argv[2:]
algo = (marl.PPOConfig().environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
        .training(train_batch_size=64, num_epochs=1).debugging(seed=0).build())
algo.train()
for point in points:
    algo.save(f"{root}/{point}/ckpt")  # the previous checkpoint (iteration 1)
algo.train()
children = []
for point in points:  # one forked process per point, each killed part-way through its save
    pid = os.fork()
    if pid == 0:
        def hook(step, point=point):
            if step == point:
                # one write per line: the children share this pipe, and print() under PYTHONUNBUFFERED
                # writes each argument separately, so concurrent children's words could interleave
                os.write(1, f"AT {step} {os.getpid()}\\n".encode())
                time.sleep(120)  # the test SIGKILLs this process here
        checkpoint._save_step_hook = hook
        algo.save(f"{root}/{point}/ckpt")  # iteration 2
        os.write(1, f"SAVED {point}\\n".encode())
        os._exit(0)
    children.append(pid)
print("STATUS", [os.waitpid(pid, 0)[1] for pid in children], flush=True)
"""

KILL_POINTS = ["policies_written", "learner_written", "runners_written", "extra_written", "manifest_written",
               "previous_moved_aside", "renamed"]


def test_a_save_killed_at_any_point_leaves_a_restorable_checkpoint(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(tmp_path), *KILL_POINTS],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        reached = set()
        for _ in KILL_POINTS:
            line = proc.stdout.readline().split()
            assert line and line[0] == "AT", (line, proc.stderr.read() if proc.poll() is not None else "")
            reached.add(line[1])
            os.kill(int(line[2]), signal.SIGKILL)
        status = proc.stdout.readline().split(maxsplit=1)
        proc.wait(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert reached == set(KILL_POINTS)
    assert status[0] == "STATUS" and eval(status[1]) == [signal.SIGKILL] * len(KILL_POINTS)  # killed, none finished
    for point in KILL_POINTS:
        path = tmp_path / point / "ckpt"
        algo = marl.Algorithm.from_checkpoint(path)
        try:
            # Killed before the new checkpoint was renamed into place: the previous one (iteration 1) is
            # intact. Killed after: the new one (iteration 2) is, whole.
            assert algo.iteration == (2 if point == "renamed" else 1), point
            before = algo.iteration
            assert algo.train()["iteration"] == before + 1
            algo.save(path)  # and the next save cleans up what the killed one left
        finally:
            algo.stop()
        assert sorted(p.name for p in path.parent.iterdir()) == ["ckpt"], point


def test_callable_mapping_needs_the_config_in_python(tmp_path):
    def make():
        return tag_config().multi_agent(policy_mapping_fn=lambda agent, episode: "predator" if agent.startswith("adv") else "prey")

    algo = make().build()
    try:
        algo.train()
        algo.save(tmp_path / "ckpt")
        saved = weights_of(algo)
    finally:
        algo.stop()
    with pytest.raises(marl.CheckpointError, match=r"policy mapping is a Python callable.*config=config"):
        marl.Algorithm.from_checkpoint(tmp_path / "ckpt")
    algo = marl.Algorithm.from_checkpoint(tmp_path / "ckpt", config=make())
    try:
        assert_same_weights(saved, weights_of(algo))
    finally:
        algo.stop()


class UnseededNoise(marl.MultiAgentEnv):
    """Draws its start state from a private, unseeded generator: replaying an episode cannot reproduce it."""

    possible_agents = ["a"]
    metadata = {"name": "unseeded", "turn_based": False}

    def __init__(self):
        import gymnasium as gym
        import random

        self.obs_space, self.act_space = gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2)
        self.private = random.Random()
        self.t = 0

    def observation_space(self, agent):
        return self.obs_space

    def action_space(self, agent):
        return self.act_space

    def reset(self, seed=None):
        self.t, self.start = 0, self.private.random()
        return {"a": np.full(2, self.start, np.float32)}, {}

    def step(self, actions):
        self.t += 1
        done = self.t >= 50
        return {"a": np.full(2, self.start * (1 - self.t / 50), np.float32)}, {"a": 1.0}, {"__all__": done}, {"__all__": done}, {}


def test_restore_warns_when_an_env_does_not_replay_identically(tmp_path, caplog):
    marl.register_env("unseeded_noise", lambda cfg: UnseededNoise())
    config = (marl.PPOConfig().environment("unseeded_noise").env_runners(num_envs_per_env_runner=1, rollout_fragment_length=8)
              .training(train_batch_size=8, num_epochs=1).debugging(seed=0))
    algo = config.build()
    try:
        algo.train()  # mid-episode (t=8 of 50)
        algo.save(tmp_path / "ckpt")
        with caplog.at_level("WARNING", logger="marl"):
            algo.restore(tmp_path / "ckpt")
    finally:
        algo.stop()
    assert any("not deterministic given its reset seed and actions" in r.getMessage() for r in caplog.records)


def test_self_play_resume_continues_the_pool_and_its_ratings(tmp_path):
    config = (
        marl.load_scenario("scenarios/connect_four_self_play.yaml")
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)
        .training(train_batch_size=64, minibatch_size=64, num_epochs=1)
        .multi_agent(self_play={"policy": "main", "pool_size": 2, "snapshot_every": 2})
        .debugging(seed=4)
    )
    algo = config.build()
    try:
        for _ in range(3):
            algo.train()
        algo.save(tmp_path / "ckpt")
        straight = [algo.train() for _ in range(3)]
        straight_weights = weights_of(algo)
        algo.restore(tmp_path / "ckpt")
        resumed = [algo.train() for _ in range(3)]
        assert_same_weights(straight_weights, weights_of(algo))  # the snapshots (main@0, main@1) included
    finally:
        algo.stop()
    for a, b in zip(straight, resumed):
        assert (a["self_play/elo"], a["self_play/snapshots"], a["self_play/games"]) == \
               (b["self_play/elo"], b["self_play/snapshots"], b["self_play/games"])


def test_qmix_restore_continues_bit_identically(tmp_path):
    """Joint replay, the mixer inside the module and its target copy: all in the checkpoint."""
    def config():
        return (
            marl.load_scenario("scenarios/simple_spread_qmix.yaml")
            .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
            .training(train_batch_size=16, num_steps_sampled_before_learning_starts=20, min_env_steps_per_iteration=40,
                      target_network_update_freq=30, replay_capacity=500, training_intensity=2)
            .debugging(seed=2)
        )

    algo = config().build()
    try:
        for _ in range(3):
            algo.train()
        algo.save(tmp_path / "ckpt")
        for _ in range(3):
            algo.train()
        straight = weights_of(algo)
    finally:
        algo.stop()
    algo = marl.Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        for _ in range(3):
            algo.train()
        assert_same_weights(straight, weights_of(algo))
    finally:
        algo.stop()
