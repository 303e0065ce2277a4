"""Layering of the whole of `marl/`, with every import counted: at module top, inside functions, `from marl.x
import submodule` alike. Each package sits on a layer (LAYERS, bottom up); a module imports only its own layer
and the ones below; the module graph has no circle; marl's own modules are imported at module top (a
function-local import hides a circle from the reader and from this test), and the only imports left inside
functions are the heavy optional dependencies of LAZY. `python -m pytest tests/test_layers.py -q` prints the
offending arrows."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]

# Bottom up; a module imports only from its own layer and those below (the house plan's table of layers).
LAYERS = [
    ("leaf", ["marl.errors", "marl.import_paths", "marl.path_checks"]),
    ("data", ["marl.data"]),
    ("execution", ["marl.execution"]),
    ("envs", ["marl.envs"]),
    ("modules", ["marl.modules"]),
    ("replay", ["marl.replay"]),
    ("mapping", ["marl.policies"]),
    ("connectors", ["marl.connectors"]),
    ("offline", ["marl.offline"]),
    ("runners", ["marl.runners"]),
    ("inference", ["marl.inference"]),  # a trained policy acting outside a run: connectors, module, connectors
    ("external", ["marl.external"]),
    ("learners", ["marl.learners"]),
    ("workflow", ["marl.workflow"]),
    ("config", ["marl.config"]),
    ("checkpoint", ["marl.checkpoint"]),
    ("logging", ["marl.logging"]),
    ("runtime", ["marl.runtime"]),
    ("algorithms", ["marl.algorithms"]),
    ("population", ["marl.population"]),  # PSRO and ratings: they build Algorithms from configs
    ("tune", ["marl.tune"]),
    ("experiment", ["marl.experiment"]),
    ("cli", ["marl.cli"]),
    ("package", ["marl"]),
]

# Imported inside functions on purpose: heavy or optional dependencies that a run which does not use them
# should neither need installed nor pay the import time of (name -> why).
LAZY = {
    "ray": "starts nothing until asked: embedded runs (num_env_runners=0, num_learners=0) never import Ray",
    "matplotlib": "plots and graph drawings only (`marl plot`, `marl graph --out`, reports)",
    "rliable": "the report's interval estimates only",
    "mlflow": "optional logger (`loggers.mlflow`)",
    "wandb": "optional logger (`loggers.wandb`)",
    "tensorboardX": "optional logger (`loggers.tensorboard`), skipped when not installed",
    "rich": "the live display of `marl train` on a terminal",
    "vmas": "optional env family",
    "jax": "optional env family (JaxMARL)",
    "pyspiel": "optional env family (the `openspiel` extra)",
    "open_spiel": "optional env family (the `openspiel` extra): tabular policies and NashConv for PSRO",
    "jaxmarl": "optional env family (JaxMARL)",
    "pettingzoo": "optional env family",
    "mpe2": "optional env family (PettingZoo's MPE)",
    "supersuit": "optional env wrappers",
    "gymnasium_robotics": "optional env family (the `mamujoco` extra: multi-agent MuJoCo)",
    "httpx": "the policy client's HTTP only",
    "aiohttp": "the policy server's HTTP only",
    "scipy": "the Nash meta-solver's linear program only (PSRO's `meta_solver: nash`)",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted((ROOT / "marl").rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The module of `marl` an imported name lives in (a submodule, or the nearest package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(path: Path):
    """(imported name, line, inside a function) for every import statement of the file."""
    out = []

    def visit(node, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                for alias in child.names:  # `from marl.x import y`: y may be a submodule
                    full = f"{child.module}.{alias.name}"
                    out.append((full if full in MODULES else child.module, child.lineno, here))
            elif isinstance(child, ast.Import):
                out.extend((alias.name, child.lineno, here) for alias in child.names)
            visit(child, here)

    visit(ast.parse(path.read_text()), False)
    return out


def layer_of(module: str) -> int:
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} sits on no layer: add its package to LAYERS"
    return best[0]


def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(MODULES)
    for name, path in MODULES.items():
        for imported, line, _ in imports(path):
            target = resolve(imported) if imported.split(".")[0] == "marl" else None
            if target and target != name and not g.has_edge(name, target):
                g.add_edge(name, target, line=line)
    return g


def test_every_module_sits_on_a_layer():
    assert {layer_of(m) for m in MODULES}  # layer_of names the first module without one
    assert len(MODULES) > 100


def test_no_circles_with_every_import_counted():
    circles = [sorted(c) for c in nx.strongly_connected_components(graph()) if len(c) > 1]
    assert not circles, f"import circles: {circles}"


def test_no_arrow_runs_up_a_layer():
    g = graph()
    up = [f"{MODULES[a].relative_to(ROOT)}:{g.edges[a, b]['line']} imports {b} ({LAYERS[layer_of(b)][0]} is above "
          f"{LAYERS[layer_of(a)][0]})" for a, b in g.edges if layer_of(b) > layer_of(a)]
    assert not up, "\n".join(up)


def test_marl_modules_are_imported_at_module_top():
    hidden = [f"{path.relative_to(ROOT)}:{line} imports {name} inside a function"
              for path in MODULES.values() for name, line, inside in imports(path) if inside and name.split(".")[0] == "marl"]
    assert not hidden, "\n".join(hidden)


def test_only_heavy_optional_dependencies_are_imported_lazily():
    lazy = [f"{path.relative_to(ROOT)}:{line} imports {name} inside a function (import it at the top, or add it to LAZY "
            "with the reason)" for path in MODULES.values() for name, line, inside in imports(path)
            if inside and name.split(".")[0] not in LAZY and name.split(".")[0] != "marl"]
    assert not lazy, "\n".join(lazy)


def test_the_command_line_imports_no_heavy_lazy_dependency():
    """`marl` (every command's start, and so every run and every CLI test) imports none of LAZY's heavy packages:
    SciPy and matplotlib at the top of two modules cost each start ~1.5 s of its ~4 s. (PettingZoo, in LAZY, is
    cheap and read at the top by the env registry.)"""
    heavy = {"ray", "matplotlib", "rliable", "scipy", "jax", "jaxmarl", "vmas", "mlflow", "wandb", "pyspiel"}
    code = "import sys, marl.cli.main; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = set(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())
    assert heavy <= set(LAZY) and not loaded & heavy, sorted(loaded & heavy)


def test_the_checker_sees_a_hidden_circle(tmp_path, monkeypatch):
    """The graph counts a function-local import: a circle closed by one fails the test."""
    a = tmp_path / "marl" / "a.py"
    b = tmp_path / "marl" / "b.py"
    a.parent.mkdir()
    a.write_text("from marl.b import g\n")
    b.write_text("def g():\n    from marl.a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "MODULES", {"marl.a": a, "marl.b": b})
    with pytest.raises(AssertionError, match="import circles"):
        test_no_circles_with_every_import_counted()
    with pytest.raises(AssertionError, match="inside a function"):
        test_marl_modules_are_imported_at_module_top()


@pytest.mark.parametrize("module", ["marl.offline.reader", "marl.offline.writer", "marl.external.server", "marl.external.client",
                                    "marl.cli.serve", "marl.algorithms.record_episodes", "marl.workflow.external_ops",
                                    "marl.modules.build", "marl.learners.sequences", "marl.config", "marl.checkpoint",
                                    "marl.runtime", "marl.runtime.run_loop", "marl.cli"])
def test_each_module_imports_on_its_own(module):
    """No import cycle at run time: a fresh interpreter imports the module first."""
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, check=True, timeout=HANG_S)


def test_no_old_module_paths_and_no_as_before_re_exports():
    """A 0.1.0 package carries no compatibility layer: the old module paths (marl.run, marl.algorithms.checkpoint, ...)
    no longer import, no finder is installed on `import marl`, and the config layer re-exports nothing it does not use."""
    code = ("import importlib.util, sys, marl; assert importlib.util.find_spec('marl.run') is None; "
            "assert importlib.util.find_spec('marl.algorithms.checkpoint') is None; "
            "assert not any('Moved' in type(f).__name__ for f in sys.meta_path)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=HANG_S)
    config_layer = [ROOT / "marl" / "config" / "sections.py", ROOT / "marl" / "algorithms" / "algorithm_config.py",
                    ROOT / "marl" / "runtime" / "run_loop.py"]
    assert not [p.name for p in config_layer if "noqa: F401" in p.read_text()]


MAX_LINES = 400  # the house rule: one job per file, and a file a reader takes in whole


def test_no_file_in_marl_is_over_400_lines():
    """A file that grows past MAX_LINES holds more than one job: split it by job (its importers import each name
    from its new home)."""
    long = sorted(f"{path.relative_to(ROOT)}: {n} lines" for path in MODULES.values()
                  if (n := len(path.read_text().splitlines())) > MAX_LINES)
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)
