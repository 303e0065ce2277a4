"""Layering: the offline format/reader/writer and the policy server sit below the workflow; nothing in them imports
(at the top or lazily) the workflow, the algorithms or the commands above them, and each imports alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ABOVE = ("marl.workflow", "marl.algorithms", "marl.run", "marl.cli", "marl.serve_command", "marl.experiment", "marl.tune")


def marl_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("marl"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("marl")}
    return out


@pytest.mark.parametrize("package", ["offline", "external"])
def test_lower_layers_import_nothing_above_them(package):
    for path in sorted((ROOT / "marl" / package).glob("*.py")):
        above = sorted(m for m in marl_imports(path) if m.startswith(ABOVE))
        assert not above, f"{path.relative_to(ROOT)} imports {above} (a layer above it)"


@pytest.mark.parametrize("module", ["marl.offline.reader", "marl.offline.writer", "marl.external.server", "marl.external.client",
                                    "marl.serve_command", "marl.algorithms.record_episodes", "marl.workflow.external_ops"])
def test_each_module_imports_on_its_own(module):
    """No import cycle: a fresh interpreter imports the module first."""
    subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, check=True, timeout=120)
