"""JaxMARL's presets hold JaxMARL's numbers in marl's units, and benchmarks/peers/jaxmarl_regression.py: each cell marl runs is composed from the config groups and its JaxMARL preset,
one marl iteration is one JaxMARL update on the cell's task (whatever its agent count), and a shorter budget ends
marl's lr annealing and epsilon decay where JaxMARL's (fractions of its TOTAL_TIMESTEPS) end. The tasks the set adds
(MPE tag's two teams, SMAX's larger maps and SMACv2's generator) build and train. The JaxMARL side needs a checkout
and its venv: not run here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from marl.config.compose import compose
from marl.data import sample_batch as sb
from marl.envs.jaxmarl import JaxMarlEnv

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks" / "peers"


@pytest.fixture(scope="module")
def regression():
    sys.path.insert(0, str(BENCHMARKS))  # its _path then puts benchmarks/ (_common, _peer_curves) on it
    try:
        spec = importlib.util.spec_from_file_location("jaxmarl_regression", BENCHMARKS / "jaxmarl_regression.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # (its dataclass reads its own module while it is built)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))
        sys.modules.pop("jaxmarl_regression", None)


def runnable(module):
    return [cell for cell in module.CELLS.values() if cell.runnable]


def test_every_cell_of_the_set_is_listed_and_each_one_not_run_says_why(regression):
    cells = regression.CELLS.values()
    assert len(cells) == 31  # MPE 3 envs x 5 algorithms + SMAX 4 maps x 4 algorithms
    assert all(cell.marl for cell in cells)  # marl has a task and a preset for every cell
    # not run: the two cells JaxMARL's own scripts fail on (MPE tag's two observation widths), each saying where
    not_run = {c.name: c.missing for c in cells if not c.runnable}
    assert sorted(not_run) == ["ippo_ff/MPE_simple_tag_v3", "mappo_rnn/MPE_simple_tag_v3"]
    assert all(why.startswith("JaxMARL's") and "fails" in why for why in not_run.values())
    # the Q-learning cells on tag run, noting that JaxMARL's team is all four agents on their summed reward
    noted = sorted(c.name for c in cells if c.note)
    assert noted == [f"{a}/MPE_simple_tag_v3" for a in ("qmix_rnn", "vdn_ff", "vdn_rnn")]


@pytest.mark.parametrize("budget", [10_000_000, 1_048_576])
def test_a_cell_composes_from_its_preset_one_iteration_one_jaxmarl_update(regression, budget):
    for cell in regression.CELLS.values():
        items = regression.marl_items(cell, seed=3, budget=budget, threads=1)
        assert any(item.startswith("experiment=jaxmarl_") for item in items), cell.name
        config = compose(None, items).config()  # (values only: test_compose builds the presets)
        t, run = config.training_cfg, config.env_runners_cfg
        assert config.debugging_cfg.seed == 3 and config.stop_cfg.env_steps_total == budget, cell.name
        if not cell.alg:  # PPO: the batch is every agent's rows of one round
            assert t.train_batch_size == run.num_envs_per_env_runner * run.rollout_fragment_length * cell.agents, cell.name
        else:  # Q-learning: epsilon reaches 0.05 after 10 % of JaxMARL's updates (each NUM_ENVS x NUM_STEPS env steps)
            step = run.num_envs_per_env_runner * run.rollout_fragment_length
            assert step == regression.UPDATE_STEPS[cell.alg], cell.name
            jaxmarl_end = 0.1 * (budget // step) * step
            assert t.epsilon[0] == [0, 1.0] and t.epsilon[-1][1] == 0.05, cell.name
            assert abs(t.epsilon[-1][0] - jaxmarl_end) <= 1e-3 * jaxmarl_end, cell.name
        multiplier = config.learners_cfg.lr_multiplier  # the lr reaches 0 at the budget where JaxMARL's decays
        assert (multiplier[-1] == [budget, 0.0]) if cell.anneals_lr else (multiplier is None), cell.name
    assert {c.alg for c in regression.CELLS.values() if c.alg and c.anneals_lr} == {"ql_rnn_mpe", "vdn_ff_mpe"}


def updates_per_round(config) -> float:
    """Learner updates per sampling round of a recurrent mixing preset: replayed steps (sequences x max_seq_len) per
    update against training_intensity replayed steps per env step (marl.algorithms.dqn.workflow's rule)."""
    t, run = config.training_cfg, config.env_runners_cfg
    return t.training_intensity * run.num_envs_per_env_runner * run.rollout_fragment_length / (
        t.train_batch_size * t.model["max_seq_len"])


@pytest.mark.parametrize("task, preset, worlds, steps, updates, batch, target, lr, clip", [
    # JaxMARL ql_rnn_mpe.yaml: 8 x 26, BUFFER_BATCH_SIZE 32 items of a round's 26 steps, NUM_EPOCHS 1, target every
    # 200 updates, LR 0.005 annealed; ql_rnn_smax.yaml: 16 x 128, 32 items of 128 steps, NUM_EPOCHS 8, every 10, 5e-5
    # MAX_GRAD_NORM 25 and 10 on a loss twice marl's: marl clips at half
    ("jaxmarl/simple_spread", "jaxmarl_ql_rnn_mpe", 8, 26, 1, 32, 200 * 8 * 26, 0.005, 12.5),
    ("smax/2s3z", "jaxmarl_ql_rnn_smax", 16, 128, 8, 32, 10 * 16 * 128, 5e-5, 5.0),
])
def test_jaxmarl_ql_rnn_presets_replay_what_jaxmarl_replays(task, preset, worlds, steps, updates, batch, target, lr, clip):
    """A replayed item of JaxMARL's is one world's steps of a round: 32 of them an update, as many learner updates
    a round as its NUM_EPOCHS (the SMAX preset once replayed 4,096 sequences of 20 steps every 2.5 rounds)."""
    for algorithm in ("qmix_rnn", "vdn_rnn"):
        config = compose(None, [f"algorithm={algorithm}", f"task={task}", f"experiment={preset}"]).config()
        t, run = config.training_cfg, config.env_runners_cfg
        assert (run.num_envs_per_env_runner, run.rollout_fragment_length) == (worlds, steps)
        assert (t.train_batch_size, t.model["max_seq_len"], t.replay_capacity) == (batch, steps, 5000)
        assert updates_per_round(config) == updates
        eps_end = round(0.1 * (10_000_000 // (worlds * steps)) * worlds * steps)  # 10 % of JaxMARL's updates
        assert (t.target_network_update_freq, t.lr, t.grad_clip) == (target, lr, clip)
        assert t.epsilon == [[0, 1.0], [eps_end, 0.05]]
        assert t.num_steps_sampled_before_learning_starts == round(10_000 / steps)  # LEARNING_STARTS 10000 env steps


def test_jaxmarl_mappo_rnn_mpe_preset_holds_jaxmarls_numbers():
    """mappo_homogenous_rnn_mpe.yaml: 16 x 128, 4 epochs x 4 minibatches, lr 2e-3 annealed to 0 at 1e7, GRU 128 after a
    128 tanh layer, no agent id in the actor's input, entropy 0.01, grad norm 0.5."""
    config = compose(None, ["algorithm=mappo_rnn", "task=jaxmarl/simple_spread", "experiment=jaxmarl_mappo_rnn_mpe"]).config()
    t, run = config.training_cfg, config.env_runners_cfg
    assert (run.num_envs_per_env_runner, run.rollout_fragment_length) == (16, 128)
    assert (t.train_batch_size, t.minibatch_size, t.num_epochs) == (16 * 128 * 3, 16 * 128 * 3 // 4, 4)
    assert (t.lr, t.entropy_coeff, t.grad_clip, t.clip_param, t.vf_clip_param, t.agent_id) == (0.002, 0.01, 0.5, 0.2, 0.2, False)
    assert config.learners_cfg.lr_multiplier == [[0, 1.0], [10_000_000, 0.0]]
    assert t.model == {"recurrent": "gru", "hiddens": [128], "cell_size": 128, "max_seq_len": 128, "activation": "tanh"}


def test_jaxmarl_vdn_ff_mpe_preset_holds_jaxmarls_numbers():
    """vdn_ff_mpe.yaml: 32 x 16 a round and one update of 32 joint transitions, flashbax's 195 rounds of 512 in the
    buffer, learning after 10,000 env steps, the target every 200 updates, epsilon over 10 % of 19,531 updates, lr 0.005
    decayed, grad norm 25 on its squared error = 12.5 on marl's half, no double Q, and a linear Q network (QNetwork
    at NUM_LAYERS 2 builds no hidden layer)."""
    config = compose(None, ["algorithm=vdn", "task=jaxmarl/simple_spread", "experiment=jaxmarl_vdn_ff_mpe"]).config()
    t, run = config.training_cfg, config.env_runners_cfg
    assert (run.num_envs_per_env_runner, run.rollout_fragment_length, t.min_env_steps_per_iteration) == (32, 16, 512)
    # one learner update a sampling round, as NUM_EPOCHS 1 an update (marl.algorithms.dqn.workflow's rule)
    assert t.training_intensity * 32 * 16 / t.train_batch_size == 1
    assert (t.train_batch_size, t.replay_capacity, t.num_steps_sampled_before_learning_starts) == (32, 195 * 512, 10_000)
    assert (t.target_network_update_freq, t.tau) == (200 * 512, 1.0)
    assert t.epsilon == [[0, 1.0], [round(0.1 * (10_000_000 // 512) * 512), 0.05]]
    assert (t.lr, t.gamma, t.grad_clip, t.n_step, t.double_q, t.td_error_loss) == (0.005, 0.9, 12.5, 1, False, "mse")
    assert config.learners_cfg.lr_multiplier == [[0, 1.0], [10_000_000, 0.0]]
    assert (t.model["hiddens"], t.dueling, t.agent_id) == ([], False, True)


# a few worlds, short rounds, learning from the first round: one iteration trains each policy once or more
TINY_Q = ["env_runners.num_envs_per_env_runner=4", "env_runners.rollout_fragment_length=8", "training.replay_capacity=512",
          "training.num_steps_sampled_before_learning_starts=32", "training.target_network_update_freq=64",
          "training.min_env_steps_per_iteration=64", "training.training_intensity=1"]


def test_vdn_ff_on_mpe_tag_trains_a_team_per_policy_on_its_own_observations_and_reward(regression):
    """MPE tag through the adapter: the adversaries (observations of 16) one VDN group, the good agent (14) another,
    each a linear Q network over its observation and its place's one-hot; each group's reward is its own agents'
    (adversaries: 10 each per contact, so 30 a contact for the team; the good agent: -10 per contact, minus its
    boundary penalty), not JaxMARL's sum over the four."""
    cell = regression.CELLS["vdn_ff/MPE_simple_tag_v3"]
    algo = compose(None, [*regression.marl_items(cell, seed=0, budget=10_000_000, threads=1), *TINY_Q]).config(
        validate=True).build()
    try:
        result = algo.train()
        modules = algo.learners.local.module
        assert set(modules.keys()) == {"adversary", "agent"}
        for pid, (agents, width) in {"adversary": (3, 16), "agent": (1, 14)}.items():
            module = modules[pid]
            assert module.n_agents == agents and module.agent.trunk is None  # one Linear: obs + one-hot -> 5 actions
            assert (module.agent.advantage[0].in_features, module.agent.advantage[0].out_features) == (width + agents, 5)
            buffer = algo.replay_buffers[pid]
            assert buffer.columns[sb.OBS].shape[1:] == (agents, width)
            assert np.isfinite(result[f"losses/{pid}/loss"])
        chaser = algo.replay_buffers["adversary"].columns[sb.REWARDS][:len(algo.replay_buffers["adversary"])]
        prey = algo.replay_buffers["agent"].columns[sb.REWARDS][:len(algo.replay_buffers["agent"])]
        assert np.all(np.asarray(chaser) % 30 == 0) and np.all(np.asarray(chaser) >= 0)
        assert np.all(np.asarray(prey) <= 0)
    finally:
        algo.stop()


@pytest.mark.parametrize("env, units, width", [("3s5z_vs_3s6z", 8, 218), ("6h_vs_8z", 6, 179),
                                               ("smacv2_10_units", 10, 257)])
def test_the_sets_smax_maps_build_with_jaxmarls_scenarios(regression, env, units, width):
    """Each SMAX map of the set through the adapter: its allies, their observation width, the PPO batch every ally's
    rows of a round, and the unit types: fixed by the map (6h_vs_8z: six hydralisks), drawn each episode by SMACv2's
    generator on smacv2_10_units."""
    cell = regression.CELLS[f"mappo_rnn/{env}"]
    config = compose(None, [*regression.marl_items(cell, seed=0, budget=10_000_000, threads=1),
                            "env_runners.num_envs_per_env_runner=2"]).config(validate=True)
    spec = config.env_spec()
    assert spec.possible_agents == tuple(f"ally_{i}" for i in range(units))
    assert {spec.observation_spaces[a]["observation"].shape for a in spec.possible_agents} == {(width,)}
    assert config.training_cfg.train_batch_size == 2 * 128 * units
    world = JaxMarlEnv(config.environment_cfg.env, dict(config.environment_cfg.env_config), num_worlds=1)  # (compiled)
    drawn = set()
    for seed in range(4):
        world.reset(seed=seed)
        drawn.add(tuple(np.asarray(world._state.state.unit_types[0, :units]).tolist()))
    assert len(drawn) > 1 if env.startswith("smacv2") else len(drawn) == 1
    if env == "6h_vs_8z":
        assert drawn == {(5,) * 6}  # hydralisks
    config.build().stop()
