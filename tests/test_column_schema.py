"""One column schema (`marl.data.columns`): the dict-API runner, the batched runner, the policy server and the
offline writer/reader give the same config batches whose columns, dtypes and per-row shapes are the schema's,
computed here from the env's spaces and the algorithm's requested columns alone."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.data.columns import ALWAYS, REQUESTABLE, ColumnSpec, assemble, check_columns, columns_for
from marl.envs import make_env
from marl.errors import ConfigError
from marl.external.server import ExperienceServer
from marl.offline.schema import SCALAR_COLUMNS, to_columns, to_sample_batch, to_table
from marl.policies import resolve_policies
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.vector_env_runner import VectorEnvRunner

pytest.importorskip("vmas")


def config(algo: str, batched):
    env_config = {"max_steps": 4, "n_agents": 2}  # episodes end inside the fragment: terminations and cuts
    if algo == "DQN":
        env_config["continuous_actions"] = False
    cfg = (getattr(marl, f"{algo}Config")().environment("vmas.balance", env_config=env_config)
           .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=6, batched=batched).debugging(seed=0))
    cfg.validate()
    return cfg


def expected(cfg, extra=frozenset()) -> dict[str, dict[str, ColumnSpec]]:
    """Each policy's schema from the env's spaces: flat float32 observations; Discrete actions int64 scalars,
    Box actions float32 rows of the space's shape."""
    env = make_env(cfg.environment_cfg.env, dict(cfg.environment_cfg.env_config))
    try:
        specs, _ = resolve_policies(env, cfg.policy_specs(), cfg.policy_mapping())
    finally:
        env.close()
    out = {}
    for pid, spec in specs.items():
        space = spec.action_space
        discrete = isinstance(space, gym.spaces.Discrete)
        out[pid] = columns_for((int(np.prod(spec.observation_space.shape)),), np.float32, () if discrete else space.shape,
                               np.int64 if discrete else np.float32, cfg.runner_columns(pid) | extra)
    return out


def assert_fits(batch: sb.SampleBatch, specs: dict[str, ColumnSpec], where: str) -> None:
    rows = {n: s for n, s in specs.items() if not s.table}
    tables = {n: s for n, s in specs.items() if s.table}
    assert sorted(batch.columns) == sorted(rows), where
    assert sorted(batch.tables) == sorted(tables), where
    for name, spec in rows.items():
        col = batch.columns[name]
        dtype = torch.empty(0, dtype=col.dtype).numpy().dtype if isinstance(col, torch.Tensor) else col.dtype  # (batched: tensors)
        assert (dtype, tuple(col.shape[1:])) == (spec.dtype, spec.shape), f"{where}: column {name}"
    for name, spec in tables.items():
        assert batch.tables[name].shape[1:] == spec.shape, f"{where}: table {name}"


def sample(runner_cls, cfg):
    runner = runner_cls(cfg, 0)
    try:
        return runner.sample().batch.policy_batches
    finally:
        runner.stop()


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_runners_server_and_offline_batches_fit_the_schema(algo):
    want = expected(config(algo, False))
    dict_rows = sample(VectorEnvRunner, config(algo, False))
    batched_rows = sample(BatchedEnvRunner, config(algo, True))
    for pid, specs in want.items():
        assert_fits(dict_rows[pid], specs, f"dict runner {algo}")
        assert_fits(batched_rows[pid], specs, f"batched runner {algo}")

    # The policy server: next observations and log-probs always (what clients send), values where recorded.
    cfg = config(algo, False)
    env = make_env(cfg.environment_cfg.env, dict(cfg.environment_cfg.env_config))
    try:
        specs, agents_of = resolve_policies(env, cfg.policy_specs(), cfg.policy_mapping())
        agents, obs_space = list(env.possible_agents), env.observation_space(env.possible_agents[0])
    finally:
        env.close()
    server = ExperienceServer(cfg, specs, agents_of, agents)
    with server.lock:  # the verbs' contract: the HTTP thread calls each under the server's lock
        eid = server.start_episode()
        for _ in range(3):
            server.get_action(eid, {"obs": {a: obs_space.sample().tolist() for a in agents}})
            server.log_returns(eid, {"rewards": {a: 1.0 for a in agents}})
        server.end_episode(eid, {"obs": {a: obs_space.sample().tolist() for a in agents}, "truncated": True})
    (served, steps, _), finished = server.take(wait_s=0)
    assert [f["length"] for f in finished] == [3]
    assert steps == 3
    for pid, schema in expected(cfg, frozenset({sb.NEXT_OBS, sb.ACTION_LOGP})).items():
        assert_fits(served[pid], schema, f"policy server {algo}")

    # The offline format: written from the dict runner's rows, read back in the schema's dtypes.
    for pid, batch in dict_rows.items():
        read = to_sample_batch(to_columns(to_table(batch, pid, agents, weights_version=3)))
        for name in [n for n in want[pid] if n in read and n != sb.ACTION_MASK]:
            spec = want[pid][name]
            assert (read[name].dtype, read[name].shape[1:]) == (spec.dtype, spec.shape), f"offline {algo}: {name}"
        assert read[sb.WEIGHTS_VERSION].dtype == SCALAR_COLUMNS[sb.WEIGHTS_VERSION] and set(read[sb.WEIGHTS_VERSION]) == {3}
        assert set(ALWAYS) - {sb.ENV_INDEX} <= set(read.columns)  # the format keeps no env copy


def test_columns_for_resolves_shapes_tables_and_masks():
    specs = columns_for((5,), np.uint8, (2,), np.float32, {sb.NEXT_OBS, sb.NEXT_ACTION_MASK, sb.STATE}, mask_dim=4,
                        state_dim=7, module_state={"h": np.zeros(3, np.float32)})
    assert specs[sb.NEXT_OBS] == ColumnSpec(sb.NEXT_OBS, (5,), np.dtype(np.uint8))
    assert specs[sb.NEXT_ACTION_MASK].shape == (4,) and specs[sb.ACTION_MASK].dtype == np.float32
    assert specs[sb.STATE].table and specs[sb.STATE].shape == (7,) and specs["state.index"].dtype == np.int64
    assert specs["state_in.h"].table and specs[sb.STATE_IN_INDEX].dtype == np.int64 and sb.EPISODE_START in specs
    unmasked = columns_for((5,), np.float32, (), np.int64, {sb.NEXT_OBS, sb.NEXT_ACTION_MASK})
    assert sb.NEXT_ACTION_MASK not in unmasked and sb.ACTION_MASK not in unmasked  # no mask: no mask columns
    with pytest.raises(ValueError, match="global state size"):
        columns_for((5,), np.float32, (), np.int64, {sb.STATE})


def test_assemble_casts_to_the_schema_and_refuses_what_does_not_fit():
    specs = columns_for((2,), np.float32, (2, 3), np.float32)
    rows = {name: np.zeros((4,) + s.shape) for name, s in specs.items()}
    rows[sb.ACTIONS] = np.zeros((4, 6))  # a flat Box action row: laid out as the runners lay it
    out = assemble(specs, rows)
    assert out[sb.ACTIONS].shape == (4, 2, 3) and out[sb.T].dtype == np.int32 and out[sb.OBS].dtype == np.float32
    with pytest.raises(ValueError, match="differ from the schema"):
        assemble(specs, {k: v for k, v in rows.items() if k != sb.T})
    with pytest.raises(ValueError, match="column 'obs' has rows of shape"):
        assemble(specs, {**rows, sb.OBS: np.zeros((4, 3))})


def test_requested_columns_are_checked_by_name_and_need():
    assert check_columns({sb.VF_PREDS, sb.BOOTSTRAP_VALUE}, "p") == {sb.VF_PREDS, sb.BOOTSTRAP_VALUE}
    with pytest.raises(ConfigError, match="unknown sample column"):
        check_columns({"values"}, "p")
    with pytest.raises(ConfigError, match="needs 'next_obs'"):
        check_columns({sb.NEXT_ACTION_MASK}, "p")
    assert sb.STATE in REQUESTABLE
