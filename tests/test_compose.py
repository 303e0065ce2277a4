"""Config groups (marl.config.compose): algorithm x task x experiment, a scenario's defaults list, the command
line; one precedence, each key's origin, and the errors that name it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from marl.algorithms.ppo.action_space_defaults import DISCRETE
from marl.config.compose import GROUPS, algorithm_family, compose, group_options, load_scenario
from marl.config.registry import discovered
from marl.config.scenario import config_from_dict
from marl.errors import ConfigError
from marl.experiment.suite import load_suite
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
FLAT = ROOT / "tests" / "fixtures" / "flat_scenarios"  # the scenario files as they were before they were compositions

# Where a composition states what the former file left to a default of the same value: key -> (value, why equal)
SAME_AS_DEFAULT = {
    "vmas_balance_mappo": {"environment.env_config.random_package_pos_on_line": (True, "VMAS balance's default"),
                           "environment.env_config.package_mass": (5, "VMAS balance's default")},
    "vmas_simple_spread_ppo": {"environment.env_config.n_agents": (3, "VMAS simple_spread's default"),
                               "training.gae_lambda": (DISCRETE["gae_lambda"], "PPO's auto for discrete actions"),
                               "training.vf_loss_coeff": (DISCRETE["vf_loss_coeff"], "PPO's auto for discrete actions"),
                               "training.grad_clip": (DISCRETE["grad_clip"], "PPO's auto for discrete actions")},
    "simple_tag_ppo": {"training.model.activation": ("tanh", "ActorCriticMLP's default activation")},
}


def run(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_S, env=env)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and value and not f"{prefix}{key}".startswith("multi_agent.policies"):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("name", sorted(p.stem for p in FLAT.glob("*.yaml")))
def test_composed_scenario_equals_the_former_file(name):
    text = (ROOT / "scenarios" / f"{name}.yaml").read_text()
    assert "defaults:" in text  # it is a composition now
    before = _flat(config_from_dict(yaml.safe_load((FLAT / f"{name}.yaml").read_text())).to_dict())
    after = _flat(load_scenario(ROOT / "scenarios" / f"{name}.yaml").to_dict())
    differ = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    allowed = SAME_AS_DEFAULT.get(name, {})
    assert differ == set(allowed), {k: (before.get(k), after.get(k)) for k in differ}
    for key, (value, _why) in allowed.items():
        assert after[key] == value and before.get(key) in (None, "auto")


ONE_TASK_PER_FAMILY = ("gym/cartpole", "mpe/simple_spread", "vmas/navigation", "jaxmarl/simple_spread", "smax/3m",
                       "lbf/foraging_8x8_2p_2f", "rware/tiny_2ag", "butterfly/pistonball", "openspiel/kuhn_poker")


def test_every_family_has_a_task_group():
    families = {option.split("/")[0] for option in group_options("task")}
    assert {t.split("/")[0] for t in ONE_TASK_PER_FAMILY} <= families


def test_every_algorithm_composes_with_a_task_of_each_family(tmp_path):
    offline = ["offline.input=" + str(tmp_path)]  # BC, MARWIL and CQL read recorded data
    for algo in [a for a in discovered() if a != "MIXED"]:
        for task in ONE_TASK_PER_FAMILY:
            composition = compose(None, [f"algorithm={algo.lower()}", f"task={task}", *offline])
            config = composition.config()
            assert config.algo_name == algo and config.environment_cfg.env
            if algorithm_family(type(config)) == "on_policy" and task.startswith("vmas/"):  # the block, sized by `mul`
                n = config.environment_cfg.env_config["n_agents"]
                assert config.training_cfg.train_batch_size == 1024 * 10 * n
                assert composition.origin("training.train_batch_size") == "conf/task/vmas/_family.yaml:14"
        # the whole-config checks (an env probe each): every algorithm on one task
        compose(None, [f"algorithm={algo.lower()}", "task=mpe/simple_spread", *offline]).config(validate=True)


@pytest.mark.parametrize("task", ONE_TASK_PER_FAMILY)
def test_each_family_task_passes_the_whole_config_checks(task):
    compose(None, ["algorithm=ppo", f"task={task}"]).config(validate=True)


def test_mixed_is_refused_without_its_policies_in_one_line():
    with pytest.raises(ConfigError, match="policy 'default_policy' has no algorithm"):
        compose(None, ["algorithm=mixed", "task=mpe/simple_spread"]).config(validate=True)


@pytest.fixture
def conf_path(tmp_path, monkeypatch):
    """A conf folder of the user's, searched before marl's: one key set at every layer."""
    conf = tmp_path / "conf"
    for rel, text in {
        "algorithm/mine.yaml": "algo: PPO\ntraining: {lr: 0.1, gamma: 0.1, entropy_coeff: 0.1, num_epochs: 1, clip_param: 0.1}\n",
        "task/fam/_family.yaml": "training: {gamma: 0.2}\non_policy:\n  training: {entropy_coeff: 0.2}\n"
                                 "off_policy:\n  training: {epsilon: [[0, 0.5]]}\n",
        "task/fam/t.yaml": "environment: {env: CartPole-v1}\ntraining: {num_epochs: 3}\n",
        "task/fam/u.yaml": "environment: {env: CartPole-v1}\n",
        "experiment/e.yaml": "training: {clip_param: 0.4, lr: 0.4}\nstop: {iterations: 4}\n",
    }.items():
        (conf / rel).parent.mkdir(parents=True, exist_ok=True)
        (conf / rel).write_text(text)
    monkeypatch.setenv("MARL_CONF_PATH", str(conf))
    return conf


def test_one_precedence_and_each_keys_origin(conf_path, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("defaults:\n  - algorithm: mine\n  - task: fam/t\n  - experiment: e\ntraining:\n  lr: 0.5\n")
    comp = compose(scenario, ["training.clip_param=0.6"])
    t = comp.config().training_cfg
    # class defaults < algorithm < task family < its block < task < experiment < scenario < command line
    assert (t.gamma, t.entropy_coeff, t.num_epochs, t.lr, t.clip_param) == (0.2, 0.2, 3, 0.5, 0.6)
    assert t.vf_clip_param == 10.0  # untouched: the class default
    assert comp.origin("training.gamma") == "conf/task/fam/_family.yaml:1"
    assert comp.origin("training.entropy_coeff") == "conf/task/fam/_family.yaml:3"  # the on_policy block's line
    assert comp.origin("training.num_epochs") == "conf/task/fam/t.yaml:2"
    assert comp.origin("stop.iterations") == "conf/experiment/e.yaml:2"
    assert comp.origin("training.lr") == f"{scenario}:6"
    assert comp.origin("training.clip_param") == "command line"
    # an option on the command line replaces the scenario's defaults-list choice
    assert compose(scenario, ["algorithm=ppo"]).config().training_cfg.num_epochs == 3
    assert compose(scenario, ["algorithm=ppo"]).config().training_cfg.clip_param == 0.4


def test_cfg_prints_each_keys_origin_and_writes_nothing(tmp_path):
    p = run("train", "algorithm=mappo", "task=vmas/balance", "training.lr=1e-4", "--cfg", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("# ") and "algorithm=mappo, task=vmas/balance" in lines[0]
    assert "  lr: 0.0001  # command line" in lines
    assert "  env: vmas.balance  # conf/task/vmas/balance.yaml:4" in lines
    assert "  num_epochs: 4  # conf/task/vmas/_family.yaml:16" in lines
    assert "  clip_param: 0.2  # default" in lines
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("items, message", [
    (["algorithm=mapo", "task=vmas/balance"], "command line: unknown algorithm 'mapo' (did you mean 'mappo'?); options: ["),
    (["algorithm=mappo", "task=vmas/balanse"], "command line: unknown task 'vmas/balanse' (did you mean 'vmas/balance'?)"),
    (["algorithm=mappo", "task=vmas/balance", "experimnt=x"], "command line: unknown config group 'experimnt' (did you mean 'experiment'?)"),
    (["algorithm=mappo", "task=vmas/balance", "training.lrr=1"], "command line: unknown key 'training.lrr' (did you mean 'lr'?)"),
    (["algorithm=mappo", "task=vmas/balance", "training.model.hidens=[8]"],
     "command line: unknown key 'training.model.hidens' (did you mean 'hiddens'?)"),
    (["scenarios/simple_spread_ppo.yaml", "env_runner.num_env_runners=1"],
     "command line: unknown top-level key 'env_runner' (did you mean 'env_runners'?)"),
    (["scenarios/simple_spread_ppo.yaml", "multi_agent.policies.shared.modle={}"],
     "command line: unknown key 'multi_agent.policies.shared.modle' (did you mean 'model'?)"),
])
def test_a_wrong_group_option_or_key_is_one_line_exit_2_nothing_written(tmp_path, items, message):
    items = [str(ROOT / i) if i.endswith(".yaml") else i for i in items]
    p = run("train", *items, "--output", str(tmp_path / "run"), cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
    assert not any(tmp_path.iterdir())


def test_a_bad_value_in_a_file_names_the_file_and_line(conf_path, tmp_path):
    (conf_path / "task/fam/bad.yaml").write_text("environment: {env: CartPole-v1}\non_policy:\n  training:\n    num_epocs: 3\n")
    with pytest.raises(ConfigError, match=r"conf/task/fam/bad.yaml:4: unknown key 'on_policy.training.num_epocs' "
                                          r"\(did you mean 'num_epochs'\?\)"):
        compose(None, ["algorithm=ppo", "task=fam/bad"])
    scenario = tmp_path / "s.yaml"
    scenario.write_text("defaults:\n  - task: fam/t\nalgo: PPO\ntraining:\n  num_epochs: 0\n")
    with pytest.raises(ConfigError, match=rf"^{scenario}:5: 'training.num_epochs' must be >= 1, got 0$"):
        compose(scenario).config()
    scenario.write_text("defaults:\n  - tasks: fam/t\nalgo: PPO\n")
    with pytest.raises(ConfigError, match=r"s.yaml:1: unknown config group 'tasks' \(did you mean 'task'\?\)"):
        compose(scenario)


def test_a_family_block_key_of_another_algorithm_of_the_family_is_left_out(conf_path):
    # `epsilon` (the off_policy block) is DQN's, QMIX's and VDN's; TD3 has none: TD3 composes without it
    assert compose(None, ["algorithm=dqn", "task=fam/u"]).config().training_cfg.epsilon == [[0, 0.5]]
    assert "epsilon" not in compose(None, ["algorithm=td3", "task=fam/u"]).data["training"]


def test_a_family_blocks_model_option_reaches_the_modules_that_read_it(conf_path):
    # `hiddens` is read by PPO's ActorCriticMLP, not by MAT's transformer: MAT composes without it, and builds
    (conf_path / "task/fam/m.yaml").write_text("environment: {env: CartPole-v1}\non_policy:\n  training:\n"
                                               "    model: {hiddens: [8], hidenz: 1}\n")
    with pytest.raises(ConfigError, match=r"m.yaml:4: unknown key 'on_policy.training.model.hidenz' \(did you mean "
                                          r"'hiddens'\?\): no on_policy algorithm's module reads it"):
        compose(None, ["algorithm=ppo", "task=fam/m"])
    (conf_path / "task/fam/m.yaml").write_text("environment: {env: CartPole-v1}\non_policy:\n  training:\n"
                                               "    model: {hiddens: [8]}\n")
    assert compose(None, ["algorithm=ppo", "task=fam/m"]).config().training_cfg.model == {"hiddens": [8]}
    assert "hiddens" not in (compose(None, ["algorithm=mat", "task=fam/m"]).data["training"].get("model") or {})


def test_configs_lists_groups_and_options(tmp_path):
    p = run("configs", cwd=tmp_path)  # outside the repository: marl's own conf/ ships in the package
    assert p.returncode == 0, p.stderr
    for group in GROUPS:
        assert f"{group}:" in p.stdout
    assert "vmas/navigation" in p.stdout and "ippo" in p.stdout and "qmix" in p.stdout
    p = run("configs", "tsk", cwd=tmp_path)
    assert p.returncode == 2 and "unknown config group 'tsk' (did you mean 'task'?)" in p.stderr


@pytest.mark.slow
def test_conf_ships_in_the_wheel(tmp_path):
    """A pip-installed marl finds its groups: the wheel holds marl/conf (34 s here, loaded machine)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", str(ROOT), "-w",
                    str(tmp_path / "wheel"), "-q"], check=True, cwd=tmp_path, timeout=HANG_S)
    wheel = next((tmp_path / "wheel").glob("marl-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(tmp_path / "site"), str(wheel),
                    "-q"], check=True, timeout=HANG_S)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site")}
    p = run("train", "algorithm=ppo", "task=vmas/navigation", "--cfg", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "# conf/task/vmas/_family.yaml:" in p.stdout


PRESETS = sorted((ROOT / "marl" / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_each_peer_preset_names_its_source_composes_as_its_own_command_says(path):
    text = path.read_text()
    assert "# Source: " in text and "cannot express" in text  # the peer's file and version; what marl cannot say
    command = next(line for line in text.splitlines() if line.startswith("#   marl train "))
    items = command.split("marl train ", 1)[1].split("  (")[0].split()
    config = compose(None, items).config(validate=True)
    assert config.stop_cfg.env_steps_total == RLLIB_BUDGETS.get(path.stem, 10_000_000)
    if path.stem in RLLIB_BUDGETS:  # CartPole and Pendulum copies: building is cheap
        config.build().stop()


# RLlib's tuned examples: each preset's budget, and the numbers it takes from the example file
RLLIB_BUDGETS = {"rllib_multi_agent_cartpole_ppo": 300_000, "rllib_multi_agent_cartpole_dqn": 500_000,
                 "rllib_multi_agent_cartpole_appo": 2_000_000, "rllib_multi_agent_pendulum_sac": 500_000}


def test_rllib_presets_hold_the_examples_numbers():
    def training(algo, task, preset):
        return compose(None, [f"algorithm={algo}", f"task=gym/{task}", f"experiment={preset}"]).config().training_cfg
    ppo = training("ppo", "multi_agent_cartpole", "rllib_multi_agent_cartpole_ppo")
    assert (ppo.lr, ppo.num_epochs, ppo.vf_loss_coeff, ppo.model["hiddens"]) == (3e-4, 6, 0.01, [32])
    dqn = training("dqn", "multi_agent_cartpole", "rllib_multi_agent_cartpole_dqn")
    assert (dqn.lr, dqn.train_batch_size, dqn.replay_capacity, dqn.epsilon) == (5e-4, 48, 50_000, [[0, 1.0], [20000, 0.02]])
    appo = training("appo", "multi_agent_cartpole", "rllib_multi_agent_cartpole_appo")
    assert (appo.vf_loss_coeff, appo.entropy_coeff) == (0.005, 0.0)
    sac = training("sac", "multi_agent_pendulum", "rllib_multi_agent_pendulum_sac")
    assert (sac.initial_alpha, sac.lr, sac.tau, sac.num_steps_sampled_before_learning_starts) == (1.001, 8e-4, 0.005, 256)


def test_benchmarl_vmas_preset_holds_benchmarls_numbers():
    """BenchMARL's fine-tuned VMAS experiment (fine_tuned/vmas/conf/config.yaml) in marl's units."""
    on = compose(None, ["algorithm=mappo", "task=vmas/navigation", "experiment=benchmarl_vmas"]).config()
    t, run, ev = on.training_cfg, on.env_runners_cfg, on.evaluation_cfg
    n = on.environment_cfg.env_config["n_agents"]
    assert (t.gamma, t.lr, t.grad_clip, t.gae_lambda, t.entropy_coeff) == (0.9, 5e-5, 5.0, 0.9, 0.0)
    assert run.num_envs_per_env_runner * run.rollout_fragment_length == 60_000  # frames per batch
    assert (t.train_batch_size, t.minibatch_size) == (60_000 * n, 4096 * n)  # agent rows
    assert (ev.evaluation_interval * 60_000, ev.evaluation_duration) == (120_000, 200)
    off = compose(None, ["algorithm=qmix", "task=vmas/navigation", "experiment=benchmarl_vmas"]).config()
    t, run, ev = off.training_cfg, off.env_runners_cfg, off.evaluation_cfg
    assert run.num_envs_per_env_runner * run.rollout_fragment_length == t.min_env_steps_per_iteration == 6000
    assert (t.train_batch_size, t.replay_capacity, ev.evaluation_interval * 6000) == (128, 1_000_000, 120_000)
    assert round(t.training_intensity * 6000 / 128) == 1000  # optimizer steps per batch
    assert t.epsilon == [[0, 0.8], [1_000_000, 0.01]]


def test_jaxmarl_pqn_vdn_preset_holds_jaxmarls_numbers():
    """JaxMARL's pqn_vdn_ff_mpe.yaml in marl's units: 256 x 16 env steps per update, 16 minibatches of joint steps,
    grad norm 1 on its squared error = 0.5 on marl's half squared error, epsilon over 244.1 updates."""
    config = compose(None, ["algorithm=pqn_vdn", "task=jaxmarl/simple_spread", "experiment=jaxmarl_pqn_vdn_ff_mpe"]).config()
    t, run = config.training_cfg, config.env_runners_cfg
    assert (run.num_envs_per_env_runner, run.rollout_fragment_length, t.min_env_steps_per_iteration) == (256, 16, 4096)
    assert (t.train_batch_size, t.minibatch_size, t.num_epochs) == (4096 * 3, 4096 // 16, 4)
    assert (t.lr, t.gamma, t.q_lambda, t.grad_clip, t.agent_id) == (5e-4, 0.9, 0.3, 0.5, True)
    assert t.epsilon == [[0, 1.0], [round(0.1 * (10_000_000 // 4096) * 4096), 0.1]]
    assert t.model == {"hiddens": [256, 256], "activation": "relu", "layer_norm": True, "dueling": False}


def test_benchmarl_vmas_tasks_hold_benchmarls_task_parameters():
    """conf/task/vmas/*: benchmarl/conf/task/vmas/<task>.yaml's values (BenchMARL 1.5.0-10-g179a956)."""
    expected = {
        "navigation": dict(max_steps=100, n_agents=3, collisions=True, agents_with_same_goal=1, split_goals=False,
                           observe_all_goals=False, shared_rew=False, lidar_range=0.35, agent_radius=0.1),
        "balance": dict(max_steps=100, n_agents=4, random_package_pos_on_line=True, package_mass=5),
        "sampling": dict(max_steps=100, n_agents=3, shared_rew=False, n_gaussians=3, lidar_range=0.2, cov=0.05,
                         collisions=True, spawn_same_pos=False),
        "transport": dict(max_steps=100, n_agents=4, n_packages=1, package_width=0.15, package_length=0.15, package_mass=50),
        "wheel": dict(max_steps=100, n_agents=4, line_length=1, line_mass=30, desired_velocity=0.05),
    }
    for task, kwargs in expected.items():
        assert compose(None, ["algorithm=ppo", f"task=vmas/{task}"]).data["environment"]["env_config"] == kwargs


def test_suites_reference_groups_not_scenario_files():
    for suite in (ROOT / "suites").glob("*.yaml"):
        assert "scenario:" not in suite.read_text(), suite.name
    run = next(r for r in load_suite(ROOT / "suites" / "vmas_10m.yaml").runs if r.name == "navigation/MAPPO/seed_0")
    config = run.config()
    assert config.environment_cfg.env == "vmas.navigation" and config.environment_cfg.env_config["n_agents"] == 4
    # the family's on-policy settings, its batch sized by `mul` to 600 worlds x 100 steps x 4 agents
    assert (config.training_cfg.train_batch_size, config.training_cfg.minibatch_size) == (240_000, 4000)
    assert (config.training_cfg.lr, config.training_cfg.gae_lambda) == (5e-4, 0.95)


def test_a_command_line_key_inside_a_policy_table_adds_to_it_a_file_replaces_it(tmp_path):
    scenario = ROOT / "scenarios" / "simple_tag_ppo.yaml"  # policies predator and prey, from its task
    config = compose(scenario, ["multi_agent.policies.prey.model.hiddens=[8]"]).config()
    assert config.multi_agent_cfg.policies == {"predator": {}, "prey": {"model": {"hiddens": [8]}}}
    assert list(compose(scenario, ["multi_agent.policies={solo: {}}"]).data["multi_agent"]["policies"]) == ["solo"]
    other = tmp_path / "s.yaml"
    other.write_text("defaults:\n  - algorithm: ppo\n  - task: mpe/simple_tag\nmulti_agent:\n  policies: {solo: {}}\n"
                     "  policy_mapping: {'*': solo}\n")
    assert list(compose(other).config().multi_agent_cfg.policies) == ["solo"]  # the file's table replaces the task's


def test_a_train_batch_below_one_sampling_round_is_named_with_the_value_used():
    config = compose(None, ["algo=PPO", "environment.env=CartPole-v1", "training.train_batch_size=256",
                            "training.minibatch_size=64"]).config(validate=True)
    (note,) = config.batch_notes()
    assert "'training.train_batch_size' 256 is below one sampling round (1 runner(s) x 8 envs x 128 steps)" in note
    assert "at least 1024 agent steps" in note
    assert compose(None, ["algo=PPO", "environment.env=CartPole-v1"]).config().batch_notes() == []
    assert compose(None, ["algo=DQN", "environment.env=CartPole-v1"]).config().batch_notes() == []  # its own unit


def test_a_scenario_file_reads_numbers_as_omegaconf_does(tmp_path):
    scenario = tmp_path / "s.yaml"  # PyYAML alone reads 1e-4 as a string; OmegaConf's loader as a float
    scenario.write_text("algo: PPO\nenvironment: {env: CartPole-v1}\ntraining: {lr: 1e-4}\n")
    assert load_scenario(scenario).training_cfg.lr == 1e-4


@pytest.mark.parametrize("item, message", [
    ("training.model.hidens=[8]", "unknown key 'training.model.hidens' (did you mean 'hiddens'?); policy 'main': ActorCriticMLP reads"),
    ("multi_agent.policies.main.modle={}", "unknown key 'multi_agent.policies.main.modle' (did you mean 'model'?)"),
    ("multi_agent.policies.main.model.activaton=relu",
     "unknown key 'multi_agent.policies.main.model.activaton' (did you mean 'activation'?)"),
    ("multi_agent.self_play.pool_sise=3", "unknown key 'multi_agent.self_play.pool_sise' (did you mean 'pool_size'?)"),
    ("connectors.env_to_module=[{name: frame_stak}]", "unknown env_to_module piece 'frame_stak' (did you mean 'frame_stack'?)"),
    ("evaluation.evaluation_config.environment.env_confg={}",
     "unknown key 'evaluation.evaluation_config.environment.env_confg' (did you mean 'env_config'?)"),
    ("psro.meta_solvr=nash", "unknown key 'psro.meta_solvr' (did you mean 'meta_solver'?)"),
])
def test_did_you_mean_at_every_level_with_the_keys_origin(item, message):
    items = ["algorithm=ppo", "task=openspiel/connect_four", "multi_agent.policies.main={}", item]
    if "self_play" in item:
        items.append("multi_agent.self_play.policy=main")
    with pytest.raises(ConfigError) as err:
        compose(None, items).config(validate=True)
    assert str(err.value).startswith("command line: ") and message in str(err.value) and "\n" not in str(err.value)
