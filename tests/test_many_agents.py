"""Many agents: MAgent2 battle trains with two policies; batch sizes and memory do not grow with the agents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marl import cli
from marl.data import sample_batch as sb

ROOT = Path(__file__).resolve().parents[1]


def test_battle_trains_red_and_blue_through_marl_train(tmp_path, capsys):
    pytest.importorskip("magent2", reason="MAgent2 is an optional extra (marl[magent2])")
    code = cli.main([
        "train", str(ROOT / "scenarios" / "magent2_battle_ppo.yaml"), "environment.env_config.map_size=20",
        "training.train_batch_size=2048", "training.minibatch_size=512", "training.num_epochs=1",
        "stop.iterations=2", "--output", str(tmp_path / "run"),
    ])
    out = capsys.readouterr().out
    assert code == 0, out
    import json

    results = [json.loads(line) for line in (tmp_path / "run" / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in results] == [1, 2]
    last = results[-1]
    for pid in ("red", "blue"):
        assert f"losses/{pid}/policy_loss" in last, sorted(last)
    # 24 agents on a 20x20 map: each update holds about 2,048 agent steps, not 2,048 env steps x 24.
    assert 2048 <= last["agent_steps_total"] - results[0]["agent_steps_total"] < 2048 + 2 * 24 * 64


def many_agents_config(num_agents: int, algo: str = "PPO"):
    import marl.envs.many_agents  # noqa: F401  (registers many_agents)
    from marl.config.registry import discovered

    return (discovered()[algo]()
            .environment("many_agents", env_config={"num_agents": num_agents, "episode_length": 20})
            .training(train_batch_size=4096, minibatch_size=512, num_epochs=1)
            .debugging(seed=0))


def test_a_train_batch_counts_agent_steps_whatever_the_number_of_agents():
    for n in (2, 500):
        algo = many_agents_config(n).build()
        try:
            r = algo.train()
            assert 4096 <= r["agent_steps_total"] < 4096 + 8 * n, (n, r["agent_steps_total"])
        finally:
            algo.stop()


def test_mappo_keeps_one_global_state_per_env_step():
    from marl.runners import EnvRunner
    from marl.envs.registry import registered_creator

    cfg = many_agents_config(50, "MAPPO").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=10)
    cfg.training(train_batch_size=1000)
    cfg.validate()
    cfg.env_creator = registered_creator("many_agents")
    runner = EnvRunner(cfg)
    batch = runner.sample().batch["default_policy"]
    assert len(batch) == 2 * 10 * 50
    assert sb.STATE not in batch.columns and len(batch.tables[sb.STATE]) == 2 * 10  # per env copy and step
    state = batch[sb.STATE]  # joined per row on demand: every agent of an env step reads the same state
    index = batch[sb.table_index(sb.STATE)]
    for step in np.unique(index)[:3]:
        rows = np.flatnonzero(index == step)
        assert len(rows) == 50 and np.all(state[rows] == state[rows[0]])
    # the learner joins per minibatch and trains
    algo = cfg.build()
    try:
        r = algo.train()
        assert np.isfinite(r["losses/default_policy/vf_loss"])
    finally:
        algo.stop()


def test_concat_and_take_keep_tables_joined_right():
    a = sb.SampleBatch({"x": np.arange(4), sb.table_index("s"): np.array([0, 0, 1, 1])}, {"s": np.array([[10.0], [11.0]])})
    b = sb.SampleBatch({"x": np.arange(2), sb.table_index("s"): np.array([0, 0])}, {"s": np.array([[20.0]])})
    both = sb.SampleBatch.concat([a, b])
    assert both["s"][:, 0].tolist() == [10, 10, 11, 11, 20, 20]
    assert both.take(np.array([5, 0, 3]))["s"][:, 0].tolist() == [20, 10, 11]
    assert both.slice(2, 5)["s"][:, 0].tolist() == [11, 11, 20]
