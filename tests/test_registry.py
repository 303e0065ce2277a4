"""Algorithms are found, not listed: a new folder under marl/algorithms/ is an algorithm everywhere."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import marl
import marl.algorithms
from marl.algorithms import ALGORITHMS, ConfigError, config_class, config_from_dict
from marl.algorithms.reference import defaults_yaml, scenario_reference
from marl.config.registry import discovered
from marl.config.capabilities import UNDECLARED, Capabilities
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parent.parent
BUILT_IN = ["APPO", "DQN", "IMPALA", "MAPPO", "MIXED", "PPO", "QMIX", "VDN"]

TOY_CONFIG = '''
from dataclasses import dataclass

from marl.algorithms.ppo.config import PPOConfig, PPOTraining
from marl.config.sections import doc


@dataclass
class ToyTraining(PPOTraining):
    toy_knob: int = doc("a key only the toy algorithm has", 7, min=0)


class ToyConfig(PPOConfig):
    algo_name = "TOY"
    training_section_cls = ToyTraining
    capabilities = PPOConfig.capabilities  # PPO's record: a MIXED run trains it on the on-policy branch
'''


@pytest.fixture
def toy_folder(tmp_path):
    """A folder `marl/algorithms/toy/` (kept in tmp_path, added to the package's search path)."""
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "__init__.py").write_text("from marl.algorithms.toy.config import ToyConfig\n")
    (folder / "config.py").write_text(textwrap.dedent(TOY_CONFIG))
    marl.algorithms.__path__.append(str(tmp_path))
    discovered.cache_clear()
    try:
        yield folder
    finally:
        marl.algorithms.__path__.remove(str(tmp_path))
        discovered.cache_clear()
        for name in [m for m in sys.modules if m.startswith("marl.algorithms.toy")]:
            del sys.modules[name]
        vars(marl.algorithms).pop("toy", None)  # the import bound the subpackage on its parent


def test_every_folder_with_a_config_class_is_discovered():
    assert set(BUILT_IN) <= set(ALGORITHMS)
    assert "?" not in ALGORITHMS  # MixingConfig: a shared base, not an algorithm
    for name, cls in ALGORITHMS.items():
        assert cls.algo_name == name and config_class(name.lower()) is cls
        assert getattr(marl, cls.__name__) is cls and getattr(marl.algorithms, cls.__name__) is cls
        assert cls.__name__ in marl.__all__ and cls.__name__ in dir(marl) and cls.__name__ in marl.algorithms.__all__


def test_every_registered_algorithm_declares_its_own_capabilities():
    """On its own class, not inherited: a new folder states what it can train (marl.config.capabilities), or this fails."""
    for name, cls in ALGORITHMS.items():
        assert isinstance(vars(cls).get("capabilities"), Capabilities), f"{name}: {cls.__qualname__} declares no capabilities"
        assert cls.capabilities is not UNDECLARED, name


def test_a_new_folder_is_an_algorithm_everywhere(toy_folder):
    cls = config_class("toy")
    assert cls.__name__ == "ToyConfig" and "TOY" in ALGORITHMS
    from marl import ToyConfig  # PEP 562: no export list to extend

    assert ToyConfig is cls and "ToyConfig" in marl.__all__ and "ToyConfig" in dir(marl)
    cfg = config_from_dict({"algo": "toy", "environment": {"env": "CartPole-v1"}, "training": {"toy_knob": 3}})
    assert isinstance(cfg, cls) and cfg.training_cfg.toy_knob == 3
    # defaults and reference come from the class
    assert yaml.safe_load(defaults_yaml("TOY"))["training"]["toy_knob"] == 7
    text = scenario_reference(["TOY"])
    assert "## `training` (TOY)" in text and "| `toy_knob` | int | `7` | >= 0 | a key only the toy algorithm has |" in text
    assert "toy_knob" not in scenario_reference()  # the committed shared reference does not change
    # MIXED accepts it because its capabilities declare a mixed_family
    mixed = marl.MixedConfig().environment("mpe2.simple_tag_v3").multi_agent(
        policies={"predator": {}, "prey": {}}, policy_mapping_fn={"adversary_*": "predator", "*": "prey"}
    )
    mixed.training(algorithms={"predator": {"algo": "TOY", "toy_knob": 1}, "prey": {"algo": "DQN"}})
    assert mixed.algo_of("predator") == "TOY" and mixed._families() == {"on_policy": ["predator"], "replay": ["prey"]}
    assert mixed.plan_for("predator").training.toy_knob == 1


def test_mixed_names_the_algorithms_it_accepts():
    cfg = marl.MixedConfig().environment("CartPole-v1").training(algorithms={"default_policy": {"algo": "APPO"}})
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert "'training.algorithms.default_policy.algo' is 'APPO'" in str(err.value)
    for name in ("PPO", "MAPPO", "DQN"):
        assert name in str(err.value)
    for name in ("APPO", "IMPALA", "VDN", "QMIX"):  # no mixed_family in their capabilities: not offered
        assert f"'{name}'" not in str(err.value).split("with", 1)[1]


def test_shared_reference_has_no_algorithm_tables():
    text = scenario_reference()
    assert "## `training` (" not in text and "marl reference ALGO" in text
    full = scenario_reference(list(ALGORITHMS))
    for name in ALGORITHMS:
        assert f"## `training` ({name})" in full


def run(*args):
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=HANG_S)


def test_cli_defaults_and_reference():
    p = run("defaults", "dqn")
    assert p.returncode == 0, p.stderr
    data = yaml.safe_load(p.stdout)
    assert data["algo"] == "DQN" and data["training"]["n_step"] == marl.DQNConfig().training_cfg.n_step == 3
    data["environment"]["env"] = "CartPole-v1"
    assert config_from_dict(data).to_dict() == data  # a valid scenario once the env is set
    p = run("reference", "PPO")
    assert p.returncode == 0, p.stderr
    assert "## `training` (PPO)" in p.stdout and "## `training` (DQN)" not in p.stdout
    p = run("reference", "NOPE")
    assert p.returncode == 2 and "unknown algo 'NOPE'" in p.stderr and "Traceback" not in p.stderr
    p = run("defaults", "NOPE")
    assert p.returncode == 2 and "invalid choice" in p.stderr


class OutsideConfig(marl.PPOConfig):
    """An algorithm kept in the user's own package, not in a folder of marl's: `algo:` names it by import path."""

    algo_name = "OUTSIDE"


def test_an_algorithm_outside_marl_is_named_by_import_path(tmp_path):
    path = f"{__name__}:OutsideConfig"
    config = config_from_dict({"algo": path, "environment": {"env": "CartPole-v1"}, "stop": {"iterations": 1}})
    assert type(config) is OutsideConfig and "OUTSIDE" not in ALGORITHMS
    assert config.to_dict()["algo"] == path  # a run's config.yaml names it the same way, so resume finds it
    algo = config.training(train_batch_size=256, num_epochs=1).debugging(seed=0).build()
    try:
        algo.train()
        algo.save(tmp_path / "ckpt")
    finally:
        algo.stop()
    restored = marl.Algorithm.from_checkpoint(tmp_path / "ckpt")
    try:
        assert type(restored.config) is OutsideConfig and restored.iteration == 1
    finally:
        restored.stop()
    with pytest.raises(ConfigError, match="not an AlgorithmConfig subclass"):
        config_class("marl.modules:RLModule")
    with pytest.raises(ConfigError, match="cannot be imported"):
        config_class("no_such_package.algos:Nope")
