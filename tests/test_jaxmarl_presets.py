"""JaxMARL's presets hold JaxMARL's numbers in marl's units, and benchmarks/jaxmarl_regression.py: each cell marl runs is composed from the config groups and its JaxMARL preset,
one marl iteration is one JaxMARL update on the cell's task (whatever its agent count), and a shorter budget ends
marl's lr annealing where JaxMARL's (a fraction of its TOTAL_TIMESTEPS) ends. The JaxMARL side needs a checkout
and its venv: not run here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from marl.config.compose import compose

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def regression():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its neighbours (_common, _peer_curves)
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
    return [cell for cell in module.CELLS.values() if cell.marl]


def test_every_cell_of_the_set_is_listed_and_each_one_marl_cannot_run_says_why(regression):
    cells = regression.CELLS.values()
    assert len(cells) == 31  # MPE 3 envs x 5 algorithms + SMAX 4 maps x 4 algorithms
    assert all(cell.missing for cell in cells if not cell.marl)
    assert {c.name for c in runnable(regression)} >= {"ippo_ff/MPE_simple_spread_v3", "ippo_rnn/2s3z", "mappo_rnn/2s3z"}


@pytest.mark.parametrize("budget", [10_000_000, 1_048_576])
def test_a_cell_composes_from_its_preset_one_iteration_one_jaxmarl_update(regression, budget):
    for cell in runnable(regression):
        items = regression.marl_items(cell, seed=3, budget=budget, threads=1)
        assert any(item.startswith("experiment=jaxmarl_") for item in items), cell.name
        config = compose(None, items).config()  # (values only: test_compose builds the presets)
        t, run = config.training_cfg, config.env_runners_cfg
        assert config.debugging_cfg.seed == 3 and config.stop_cfg.env_steps_total == budget, cell.name
        if cell.anneals_lr:  # PPO: the batch is every agent's rows of one round; lr reaches 0 at the budget
            assert t.train_batch_size == run.num_envs_per_env_runner * run.rollout_fragment_length * cell.agents, cell.name
            assert config.learners_cfg.lr_multiplier[-1] == [budget, 0.0], cell.name


def updates_per_round(config) -> float:
    """Learner updates per sampling round of a recurrent mixing preset: replayed steps (sequences x max_seq_len) per
    update against training_intensity replayed steps per env step (marl.algorithms.dqn.workflow's rule)."""
    t, run = config.training_cfg, config.env_runners_cfg
    return t.training_intensity * run.num_envs_per_env_runner * run.rollout_fragment_length / (
        t.train_batch_size * t.model["max_seq_len"])


@pytest.mark.parametrize("task, preset, worlds, steps, updates, batch, target, lr", [
    # JaxMARL ql_rnn_mpe.yaml: 8 x 26, BUFFER_BATCH_SIZE 32 items of a round's 26 steps, NUM_EPOCHS 1, target every
    # 200 updates, LR 0.005 annealed; ql_rnn_smax.yaml: 16 x 128, 32 items of 128 steps, NUM_EPOCHS 8, every 10, 5e-5
    ("jaxmarl/simple_spread", "jaxmarl_ql_rnn_mpe", 8, 26, 1, 32, 200 * 8 * 26, 0.005),
    ("smax/2s3z", "jaxmarl_ql_rnn_smax", 16, 128, 8, 32, 10 * 16 * 128, 5e-5),
])
def test_jaxmarl_ql_rnn_presets_replay_what_jaxmarl_replays(task, preset, worlds, steps, updates, batch, target, lr):
    """A replayed item of JaxMARL's is one world's steps of a round: 32 of them an update, as many learner updates
    a round as its NUM_EPOCHS (the SMAX preset once replayed 4,096 sequences of 20 steps every 2.5 rounds)."""
    for algorithm in ("qmix_rnn", "vdn_rnn"):
        config = compose(None, [f"algorithm={algorithm}", f"task={task}", f"experiment={preset}"]).config()
        t, run = config.training_cfg, config.env_runners_cfg
        assert (run.num_envs_per_env_runner, run.rollout_fragment_length) == (worlds, steps)
        assert (t.train_batch_size, t.model["max_seq_len"], t.replay_capacity) == (batch, steps, 5000)
        assert updates_per_round(config) == updates
        assert (t.target_network_update_freq, t.lr, t.epsilon) == (target, lr, [[0, 1.0], [1_000_000, 0.05]])
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
