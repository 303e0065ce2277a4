"""benchmarks/peers/benchmarl_curves.py's tables and plot from recorded runs (no training: the runs come from --merge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "peers" / "benchmarl_curves.py"
LABEL = "MAPPO balance, 32 worlds"


def fake_run(side: str, seed: int, rate: float, returns: list[float]) -> dict:
    """A run's --json entry: built at t=10, then one iteration of 3,200 env steps per 3,200 / rate seconds."""
    events = [{"ev": "started", "t": 1.0}, {"ev": "built", "t": 10.0}]
    events += [{"ev": "iter", "t": 10.0 + k * 3200 / rate, "iter": k, "env_steps": 3200 * k, "episodes": 32,
                "return": ret} for k, ret in enumerate(returns, start=1)]
    return {"side": side, "task": LABEL, "seed": seed, "t_spawn": 0.0, "t_end": events[-1]["t"] + 1.0, "rc": 0,
            "peak_pss": 2**28, "peak_rss": 2**28, "peak_procs": 1, "log": "", "load": 1.0, "events": events}


def tables_of(tmp_path: Path, runs: list[dict], *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    merged, tables = tmp_path / "runs.json", tmp_path / "tables.jsonl"
    merged.write_text(json.dumps({"runs": runs}))
    tables.touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MARL_BENCH_TABLES": str(tables)}
    p = subprocess.run([sys.executable, str(SCRIPT), "--tasks", "balance", "--worlds", "32", "--seeds",
                        "--merge", str(merged), "--bootstrap-reps", "200", *args], env=env, capture_output=True, text=True, timeout=HANG_S)
    return p, [json.loads(line) for line in tables.read_text().splitlines()]


@pytest.mark.slow  # ~50 s on the loaded 2-core machine: rliable's bootstrap at 20 points per side for the plot
def test_the_tables_read_each_point_over_its_window_and_give_iqm_with_rliable_cis(tmp_path):
    # 20 iterations to 64,000 env steps; marl's k-th iteration returns k + seed, BenchMARL's k - 10 + seed
    runs = [fake_run("marl", s, 1000.0, [k + s for k in range(1, 21)]) for s in range(3)]
    runs += [fake_run("BenchMARL", s, 500.0, [k - 10 + s for k in range(1, 21)]) for s in range(3)]
    png = tmp_path / "curves.png"
    p, tables = tables_of(tmp_path, runs, "--env-steps", "64000", "--plot", str(png))
    assert p.returncode == 0, p.stderr
    per_run, iqm, speed = tables
    # seed 0's window before 25 % (16,000 env steps) holds iterations 4 and 5, before 100 % iterations 19 and 20
    marl0 = next(r for r in per_run["rows"] if r[1] == "marl" and r[2] == "0")
    assert marl0[-4:] == ["4.5", "9.5", "14.5", "19.5"]
    rows = {row[1]: row for row in iqm["rows"]}
    assert rows["marl"][2] == "0, 1, 2"
    # IQM of three seeds (x, x + 1, x + 2) is x + 1; the bootstrap interval holds it and spans the seeds
    assert rows["marl"][-1].startswith("20.5 [") and rows["BenchMARL"][-1].startswith("10.5 [")
    low, high = (float(x) for x in rows["marl"][-1].split("[")[1].rstrip("]").split(", "))
    assert 19.5 <= low < 20.5 < high <= 21.5
    [row] = speed["rows"]
    assert row[1:4] == ["1,000", "500", "2x"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # the bootstrap under a loaded machine: ~50 s
def test_a_run_without_returns_at_a_point_leaves_that_cell_empty(tmp_path):
    runs = [fake_run(side, s, 1000.0, [float("nan")] * 5 + [1.0] * 15) for side in ("marl", "BenchMARL")
            for s in range(2)]
    p, (_, iqm, _) = tables_of(tmp_path, runs, "--env-steps", "64000")
    assert p.returncode == 0, p.stderr
    assert [row[3] for row in iqm["rows"]] == ["-", "-"] and [row[-1].split()[0] for row in iqm["rows"]] == ["1", "1"]


def test_bad_settings_are_one_line(tmp_path):
    for args, words in ((["--worlds", "0"], "--worlds 0"), (["--env-steps", "100"], "--env-steps 100"),
                        (["--tasks", "spread"], "unknown --tasks ['spread']")):
        p = subprocess.run([sys.executable, str(SCRIPT), "--seeds", *args], env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=HANG_S)
        assert p.returncode == 1 and words in p.stderr and "Traceback" not in p.stderr, p.stderr
    p, _ = tables_of(tmp_path, [fake_run("marl", 0, 1000.0, [1.0] * 3)], "--tasks", "navigation")
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1].startswith("no runs:")
