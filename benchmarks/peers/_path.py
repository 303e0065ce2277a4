"""Puts benchmarks/ on sys.path: a script in this folder then imports the shared helpers flat (`import _common as C`)
whether it runs as `python benchmarks/GROUP/NAME.py`, as `python -m benchmarks NAME` or in a peer's venv. Every
group folder holds this same file (tests/test_benchmarks.py checks they are alike)."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parent.parent)
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
