"""ruff with the rules named in pyproject.toml ([tool.ruff.lint]) finds nothing: the lint runs wherever the tests do
(.ci/run included), so a contributor sees it before CI does."""

import subprocess
import sys
from pathlib import Path
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    p = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                       capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 0, p.stdout + p.stderr
