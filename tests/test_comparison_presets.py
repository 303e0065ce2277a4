"""The peer comparisons' marl sides are the presets' compositions, changing only what each comparison sets.

benchmarks/peers/compare_jaxmarl.py: `algorithm=ippo task=jaxmarl/simple_spread experiment=jaxmarl_ippo_ff_mpe` (and
task=vmas/simple_spread), with a setting's worlds x steps, the seed and the budget (the lr annealed to 0 at it);
its JaxMARL side changes the same keys of JaxMARL's published file. benchmarks/peers/marl_tasks.py --config fine-tuned
(benchmarl_curves.py's marl side): `algorithm=mappo|ippo task=vmas/<task> experiment=benchmarl_vmas` at --worlds.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from marl.config.compose import compose

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers"))
import compare_jaxmarl  # noqa: E402
import marl_tasks  # noqa: E402

JAXMARL_PRESET = ["algorithm=ippo", "task=jaxmarl/simple_spread", "experiment=jaxmarl_ippo_ff_mpe"]


def composed(items):
    return compose(None, items).config(validate=True)


def test_compare_jaxmarl_runs_the_ippo_preset_at_each_setting():
    preset = composed(JAXMARL_PRESET)
    # at JaxMARL's published 16 x 128 every training key is the preset's
    ours = composed(compare_jaxmarl.marl_items("jaxmarl.MPE_simple_spread_v3", 16, 128, 200_000, 3, 1, False))
    assert asdict(ours.training_cfg) == asdict(preset.training_cfg)
    assert (ours.training_cfg.lr, ours.training_cfg.vf_clip_param, ours.training_cfg.model) == (
        2.5e-4, 0.2, {"hiddens": [64, 64], "activation": "tanh"})
    assert ours.environment_cfg.env == preset.environment_cfg.env == "jaxmarl.MPE_simple_spread_v3"
    # the budget rounded up to whole updates (98 x 2,048), the lr at 1 - u / 98 at update u, as ANNEAL_LR
    assert ours.learners_cfg.lr_multiplier == [[2048, 1.0], [2048 * 99, 0.0]]
    assert ours.debugging_cfg.seed == 3
    # a 1e7-step preset compiles its loss (it pays back); the benchmark's --eager-loss turns that off
    assert preset.learners_cfg.compile_loss is True and ours.learners_cfg.compile_loss is False
    # 1024 x 32: the batch and the minibatches follow the worlds x steps, the rest stays the preset's
    big = composed(compare_jaxmarl.marl_items("vmas.simple_spread", 1024, 32, 200_000, 0, 1, False))
    t = big.training_cfg
    assert (big.env_runners_cfg.num_envs_per_env_runner, big.env_runners_cfg.rollout_fragment_length) == (1024, 32)
    assert (t.train_batch_size, t.minibatch_size) == (1024 * 32 * 3, 1024 * 32 * 3 // 4)
    same = {k: v for k, v in asdict(t).items() if k not in ("train_batch_size", "minibatch_size")}
    assert same == {k: v for k, v in asdict(preset.training_cfg).items() if k in same}
    assert big.environment_cfg.env_config == {"max_steps": 25, "n_agents": 3, "continuous_actions": False}
    # JaxMARL's side: its published file but for the setting, the seed and the budget
    assert compare_jaxmarl.jaxmarl_overrides(1024, 32, 200_000, 0) == {
        "NUM_ENVS": 1024, "NUM_STEPS": 32, "SEED": 0, "NUM_SEEDS": 1, "TOTAL_TIMESTEPS": 7 * 1024 * 32}


@pytest.mark.parametrize("task, algorithm, vmas_task", [("mappo_balance", "mappo", "vmas/balance"),
                                                         ("ppo_navigation", "ippo", "vmas/navigation")])
def test_the_benchmarl_fine_tuned_side_is_the_benchmarl_vmas_preset(task, algorithm, vmas_task):
    preset = composed([f"algorithm={algorithm}", f"task={vmas_task}", "experiment=benchmarl_vmas"])
    ours = marl_tasks.make_config(task, 0, 2, worlds=64, fine_tuned=True)
    n = preset.environment_cfg.env_config["n_agents"]
    assert ours.environment_cfg.env_config == preset.environment_cfg.env_config
    t = ours.training_cfg
    assert (t.gamma, t.lr, t.adam_eps, t.grad_clip, t.gae_lambda, t.num_epochs) == (0.9, 5e-5, 1e-6, 5.0, 0.9, 3)
    assert (t.train_batch_size, t.minibatch_size) == (64 * 100 * n, 4096 * n)  # the batch follows the worlds
    same = {k: v for k, v in asdict(t).items() if k != "train_batch_size"}
    assert same == {k: v for k, v in asdict(preset.training_cfg).items() if k in same}
    assert ours.evaluation_cfg.evaluation_interval is None and ours.debugging_cfg.seed == 2
    small = marl_tasks.make_config(task, 0, 2, worlds=8, fine_tuned=True).training_cfg  # under one 4,096-step minibatch
    assert small.minibatch_size == small.train_batch_size == 8 * 100 * n
    with pytest.raises(SystemExit, match="fine-tuned is for the VMAS tasks"):
        marl_tasks.fine_tuned_items("ppo_spread", 0)
