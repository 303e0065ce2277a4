"""MIXED: different algorithms per policy in one run (simple_tag: predator by PPO, prey by DQN)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from marl import ConfigError, load_scenario
from marl.algorithms.dqn.config import DQNParts
from marl.algorithms.ppo.config import PPOParts

SCENARIO = "scenarios/simple_tag_mixed.yaml"
SMALL = [
    "env_runners.num_envs_per_env_runner=4",
    "env_runners.rollout_fragment_length=16",
    "training.min_env_steps_per_iteration=256",
    "training.algorithms.predator.train_batch_size=256",
    "training.algorithms.predator.minibatch_size=128",
    "training.algorithms.predator.num_epochs=2",
    "training.algorithms.prey.train_batch_size=32",
    "training.algorithms.prey.num_steps_sampled_before_learning_starts=100",
    "training.algorithms.prey.target_network_update_freq=200",
    "training.algorithms.prey.model={hiddens: [32]}",
    "training.algorithms.predator.model={hiddens: [32]}",
]


def test_each_policy_is_updated_by_its_own_algorithms_learner():
    algo = load_scenario(SCENARIO, SMALL).build()
    try:
        learner = algo.learners.local
        assert isinstance(learner.parts["predator"], PPOParts) and isinstance(learner.parts["prey"], DQNParts)
        assert type(learner.module["predator"]).__name__ == "ActorCriticMLP"
        assert type(learner.module["prey"]).__name__ == "QMLP"
        assert list(learner.targets) == ["prey"]  # only the DQN policy keeps a target network
        assert list(algo.replay_buffers) == ["prey"]
        assert learner.optimizers["predator"]["default"].param_groups[0]["lr"] == 1e-3
        assert learner.optimizers["prey"]["default"].param_groups[0]["lr"] == 5e-4
        before = {p: {k: v.copy() for k, v in s.items()} for p, s in algo.get_weights()["modules"].items()}
        results = [algo.train() for _ in range(3)]
        after = algo.get_weights()["modules"]
        for pid in ("predator", "prey"):
            assert any(not np.allclose(after[pid][k], before[pid][k]) for k in after[pid]), pid
        last = results[-1]
        # predator: PPO's learner (clipped surrogate, no TD errors, no target updates)
        assert any(f"losses/predator/{k}" in r for r in results for k in ("clip_fraction", "approx_kl"))
        assert not any(k.startswith("losses/predator/td_error") for r in results for k in r)
        assert "counters/target_updates/predator" not in last
        # prey: DQN's learner (TD errors, its own buffer and target network)
        assert any("losses/prey/td_error_abs_mean" in r for r in results)
        assert not any("losses/prey/clip_fraction" in r for r in results)
        assert last["counters/target_updates/prey"] >= 1
        assert last["counters/replay_transitions_added/prey"] > 0
        prey_index = algo.runners.local.agent_index["agent_0"]
        stored, _ = algo.replay_buffers["prey"].sample(64)
        assert set(np.unique(stored["agent_index"])) == {prey_index}  # predator rows never enter the prey's buffer
        # both policies' new weights reach the runner through the one sync node
        runner_state = algo.runners.local.module.get_state()
        for pid in ("predator", "prey"):
            for key, value in after[pid].items():
                np.testing.assert_array_equal(runner_state[pid][key], value)
    finally:
        algo.stop()


def test_graph_fans_out_from_one_sample_node():
    algo_cfg = load_scenario(SCENARIO, SMALL)
    wf = algo_cfg.default_workflow().validate()
    g = wf.graph
    assert [n for n in g if g.nodes[n]["op"] == "sample"] == ["sample"]
    assert set(g.successors("sample")) == {"concat", "store_prey"}
    assert nx.has_path(g, "concat", "join") and nx.has_path(g, "replay_prey", "join")
    assert g.nodes["learn_on_policy"]["params"]["policies"] == ["predator"]
    assert g.nodes["learn_prey"]["params"]["policies"] == ["prey"]
    assert [n for n in g if g.nodes[n]["op"] == "sync_weights"] == ["sync_weights"]
    # 4 envs x 16 steps = 64 env steps a round; the PPO batch of 256 takes 4 rounds, each stored once
    assert g.nodes["join"]["params"]["weights"][0] == 4
    again = type(wf).from_dict(wf.to_dict()).validate()  # the YAML form round-trips
    assert again.to_dict() == wf.to_dict()


def _with_algorithms(**entries):
    """The scenario's config with some entries of training.algorithms replaced (None: removed)."""
    cfg = load_scenario(SCENARIO)
    algorithms = dict(cfg.training_cfg.algorithms)
    for pid, entry in entries.items():
        if entry is None:
            algorithms.pop(pid)
        else:
            algorithms[pid] = entry
    return cfg.training(algorithms=algorithms)


PREY = {"algo": "DQN", "lr": 1e-3}


@pytest.mark.parametrize(
    "entries, message",
    [
        ({"prey": None}, "policy 'prey' has no algorithm: add 'training.algorithms.prey: {algo: PPO}'"),
        ({"prey": {"algo": "IMPALA"}}, "'training.algorithms.prey.algo' is 'IMPALA'"),
        ({"prey": {"lr": 0.1}}, "'training.algorithms.prey' must be a mapping with an 'algo' key"),
        ({"prey": {**PREY, "lrr": 0.1}}, "unknown key 'training.algorithms.prey.lrr' (did you mean 'lr'?)"),
        ({"prey": {**PREY, "lr": -1}}, "'training.algorithms.prey.lr' must be >= 0"),
        ({"prey": {**PREY, "epsilon": [[0, 2.0]]}}, "'training.algorithms.prey.epsilon' must have values in [0, 1] (probabilities)"),
        ({"hunter": {"algo": "PPO"}}, "names undeclared policies ['hunter']"),
    ],
)
def test_bad_mixed_config_names_the_key(entries, message):
    with pytest.raises(ConfigError) as err:
        _with_algorithms(**entries).validate()
    assert message in str(err.value)


def test_on_policy_policies_must_share_a_batch_size():
    cfg = _with_algorithms(prey={"algo": "PPO", "train_batch_size": 512})
    with pytest.raises(ConfigError, match="one train_batch_size"):
        cfg.validate()


def test_concurrently_emit_is_checked():
    from marl.workflow import Workflow
    from marl.workflow.graph import WorkflowError

    spec = {
        "nodes": {
            "sample": {"op": "sample"},
            "store": {"op": "store_to_replay", "after": "sample", "policies": ["prey"]},
            "replay": {"op": "replay", "batch_size": 8, "policies": ["prey"]},
            "learn": {"op": "learn", "after": "replay", "policies": ["prey"]},
            "join": {"op": "concurrently", "after": ["store", "learn"], "emit": [0]},
            "report": {"op": "report", "after": "join"},
        }
    }
    with pytest.raises(WorkflowError, match="input 0 .* must carry 'results', got 'stored'"):
        Workflow.from_dict(spec).validate()
    spec["nodes"]["learn"]["policies"] = []
    with pytest.raises(WorkflowError, match="learn.policies must be a non-empty list"):
        Workflow.from_dict(spec)


def _evaluate_pairing(algo, modules: dict, version: int, episodes: int, explore: bool) -> dict:
    """Evaluation returns of one predator/prey pairing of weights (the learner's weights are replaced).

    Each pairing needs its own weights version: runners skip loading a version they already hold.
    """
    algo.learners.set_weights({"version": version, "modules": modules})
    result = algo.evaluate(num_episodes=episodes, explore=explore)
    return {pid: result[f"evaluation/policy_return_mean/{pid}"] for pid in ("predator", "prey")}


@pytest.mark.slow
def test_mixed_run_improves_both_sides_against_their_untrained_selves():
    """Each algorithm's policy must beat its untrained self against the same opponent.

    Predator (PPO, judged by sampled play as it trains): trained predators must score more tags against the
    untrained prey than untrained predators do. Prey (DQN, judged greedily): against the trained predators a
    trained prey must lose less than an untrained one (which runs off the map and pays the boundary penalty).
    A run where either learner does nothing, or learns the wrong sign, fails its half. Measured at 80k env
    steps (seed 0): predator +22 over untrained, prey +28 over untrained.
    """
    config = load_scenario(SCENARIO, ["stop.env_steps_total=80000"])
    algo = config.build()
    try:
        initial = algo.get_weights()["modules"]
        result = algo.train()
        while result["env_steps_total"] < config.stop_cfg.env_steps_total:
            result = algo.train()
        trained = algo.get_weights()["modules"]
        only_predator_trained = {"predator": trained["predator"], "prey": initial["prey"]}
        v = algo.learners.get_version() + 1
        untrained_sampled = _evaluate_pairing(algo, initial, v, 100, explore=True)
        predator_sampled = _evaluate_pairing(algo, only_predator_trained, v + 1, 100, explore=True)
        assert predator_sampled["predator"] >= untrained_sampled["predator"] + 8, (untrained_sampled, predator_sampled)
        prey_untrained = _evaluate_pairing(algo, only_predator_trained, v + 2, 100, explore=False)
        prey_trained = _evaluate_pairing(algo, trained, v + 3, 100, explore=False)
        assert prey_trained["prey"] >= prey_untrained["prey"] + 8, (prey_untrained, prey_trained)
    finally:
        algo.stop()
