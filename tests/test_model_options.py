"""No training key is copied into a policy's model by hand: an algorithm declares the training keys its modules read
(`model_options` on its config class) and the base `AlgorithmConfig._plan` alone hands them on (to a module the
algorithm picks, which reads the key, where the policy's model does not set it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from marl.config.checks import section_fields
from marl.config.compose import compose
from marl.config.registry import discovered
from marl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
ALGORITHMS = sorted(a for a in discovered() if a != "MIXED")
TASKS = ("gym/cartpole", "gym/pendulum", "mpe/simple_spread")  # Discrete and Box, one agent and a team


def plans(algo: str):
    """(task, training section, {policy: plan}) for each of TASKS the algorithm takes."""
    for task in TASKS:
        try:
            config = compose(None, [f"algorithm={algo.lower()}", f"task={task}", "offline.input=/nonexistent"]).config()
            yield task, config, {pid: config.plan_for(pid) for pid in config.policy_specs()}
        except ConfigError:  # a pair the algorithm refuses (tests/test_compose.py checks the refusals)
            continue


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_training_key_in_a_models_options_is_declared_and_each_declared_key_reaches_a_module(algo):
    declared = discovered()[algo].model_options
    reached = set()
    for task, config, by_policy in plans(algo):
        fields = set(section_fields(config.training_cfg)) - {"model"}
        assert set(declared) <= fields, f"{algo}: model_options names keys its training section lacks"
        for pid, plan in by_policy.items():
            copied = (set(plan.model) & fields) - set(declared) - set(config.training_cfg.model or {})
            assert not copied, f"{algo} on {task}: training keys {sorted(copied)} reach policy '{pid}''s model undeclared"
            for key in declared:
                if getattr(config.training_cfg, key) in (None, "auto"):  # not handed on while unset
                    reached.add(key)
                elif key in plan.model:
                    reached.add(key)
                    assert plan.model[key] == _listed(getattr(config.training_cfg, key)), (algo, key)
    assert reached == set(declared), f"{algo}: model_options {sorted(set(declared) - reached)} reach no module"


def _listed(value):
    return list(value) if isinstance(value, tuple) else value


def test_a_policys_own_model_option_wins_over_the_training_key():
    config = compose(None, ["algorithm=sac", "task=gym/pendulum", "training.initial_alpha=0.5",
                            "training.model.initial_alpha=0.25"]).config()
    assert config.plan_for("default_policy").model["initial_alpha"] == 0.25
    config = compose(None, ["algorithm=sac", "task=gym/pendulum", "training.initial_alpha=0.5"]).config()
    assert config.plan_for("default_policy").model["initial_alpha"] == 0.5


def _training_names(fn: ast.FunctionDef) -> set[str]:
    """Local names bound to the training section in a function (`t = self.training_cfg`, `plan, t = ..., ...`)."""
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            pairs = [(node.targets[0], node.value)]
            if isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(node.targets[0].elts, node.value.elts))
            for target, value in pairs:
                if isinstance(target, ast.Name) and isinstance(value, ast.Attribute) and value.attr == "training_cfg":
                    names.add(target.id)
    return names


def _model_writes(fn: ast.FunctionDef):
    """The value expressions a function writes into a model dict: model[k] = v, model.setdefault(k, v),
    model.update(...), dict(plan.model, k=v), {**plan.model, k: v}, replace(plan, model=v)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == "model":
                    yield node.value
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "model" \
                    and f.attr in ("setdefault", "update"):
                yield from node.args[1:] if f.attr == "setdefault" else node.args
                yield from (k.value for k in node.keywords)
            if isinstance(f, ast.Name) and f.id == "dict" and node.args and "model" in ast.unparse(node.args[0]):
                yield from (k.value for k in node.keywords)
            yield from (k.value for k in node.keywords if k.arg == "model")
        elif isinstance(node, ast.Dict) and any(k is None and "model" in ast.unparse(v) for k, v in zip(node.keys, node.values)):
            yield from (v for k, v in zip(node.keys, node.values) if k is not None)


def test_no_function_writes_a_training_key_into_a_model():
    """The source half: outside the base `_plan`, no value written into a model dict reads the training section."""
    found = []
    for path in sorted((ROOT / "marl" / "algorithms").rglob("*.py")) + sorted((ROOT / "marl" / "config").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            if path.name == "algorithm_config.py" and fn.name == "_plan":
                continue  # the one declared path
            aliases = _training_names(fn)
            for value in _model_writes(fn):
                for node in ast.walk(value):
                    if (isinstance(node, ast.Attribute) and node.attr == "training_cfg") or \
                            (isinstance(node, ast.Name) and node.id in aliases):
                        found.append(f"{path.relative_to(ROOT)}:{value.lineno} {fn.name}: {ast.unparse(value)}")
    assert not found, "training keys copied into a model (declare them in model_options instead):\n" + "\n".join(found)


def test_the_source_check_catches_a_copy():
    source = ("def _plan(self, pid):\n    plan, t = super()._plan(pid), self.training_cfg\n    model = dict(plan.model)\n"
              "    model.setdefault('twin_q', t.twin_q)\n    return replace(plan, model={**model, 'a': self.training_cfg.a})\n")
    fn = ast.parse(source).body[0]
    aliases = _training_names(fn)
    hits = [v for v in _model_writes(fn) if any((isinstance(n, ast.Attribute) and n.attr == "training_cfg")
                                                or (isinstance(n, ast.Name) and n.id in aliases) for n in ast.walk(v))]
    assert {v.lineno for v in hits} == {4, 5}
