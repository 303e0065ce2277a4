"""Every config value is range-checked by its typed section: the class, not a list of keys."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from marl.algorithms.algorithm_config import SECTION_NAMES
from marl.config.registry import discovered
from marl.config.sections import doc
from marl.errors import ConfigError

UNBOUNDED = {("StopSection", "episode_return_mean")}  # a return target may be any number


def all_sections():
    out = {type(getattr(cls(), name + "_cfg")) for cls in discovered().values() for name in SECTION_NAMES}
    return sorted(out, key=lambda c: c.__name__)


def test_every_number_has_a_range():
    missing = []
    for sec in all_sections():
        hints = typing.get_type_hints(sec)
        for f in dataclasses.fields(sec):
            hint = str(hints[f.name])
            numeric = hint in ("<class 'int'>", "<class 'float'>") or "int |" in hint or "float |" in hint
            if numeric and not {"min", "max", "choices", "check"} & set(f.metadata) and (sec.__name__, f.name) not in UNBOUNDED:
                missing.append(f"{sec.__name__}.{f.name}")
    assert not missing, f"numbers without a range check: {missing}"


def test_every_at_most_names_a_key_of_its_section():
    for sec in all_sections():
        names = {f.name for f in dataclasses.fields(sec)}
        for f in dataclasses.fields(sec):
            if "at_most" in f.metadata:
                assert f.metadata["at_most"] in names, (sec.__name__, f.name)


def test_a_misspelt_check_is_refused():
    with pytest.raises(TypeError, match="unknown check"):
        doc("x", 1, minimum=0)


@pytest.mark.parametrize("algo", ["PPO", "APPO", "IMPALA", "MAPPO"])
def test_minibatch_larger_than_batch_fails_at_validate(algo):
    cfg = discovered()[algo]().environment("CartPole-v1").training(train_batch_size=128, minibatch_size=500)
    with pytest.raises(ConfigError, match=r"'training.minibatch_size' \(500\) must be <= 'training.train_batch_size' \(128\)"):
        cfg.validate()


def test_a_default_minibatch_above_a_small_batch_is_left_to_the_learner():
    """The user set only train_batch_size: the default minibatch (64 rows) becomes the whole batch."""
    cfg = discovered()["PPO"]().environment("CartPole-v1").training(train_batch_size=32)
    cfg.validate()


@pytest.mark.parametrize("key,value,text", [
    ("seed", -1, "'debugging.seed' must be >= 0"),
])
def test_debugging_ranges(key, value, text):
    with pytest.raises(ConfigError, match=text.replace("(", r"\(").replace(")", r"\)")):
        discovered()["PPO"]().debugging(**{key: value})


@pytest.mark.parametrize("schedule,text", [
    ([[0, 1.0], [100, 1.5]], "values in \\[0, 1\\]"),
    ([[100, 1.0], [0, 0.1]], "increasing order"),
    ([], "at least one"),
    ([[0]], "pairs"),
])
def test_epsilon_schedules_are_probabilities(schedule, text):
    for algo in ("DQN", "QMIX"):
        with pytest.raises(ConfigError, match=text):
            discovered()[algo]().training(epsilon=schedule)
