"""The benchmark harness: benchmarks/README.md is what the committed records give, and a run writes a record."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def harness(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=HANG_S)


def copy_of_benchmarks(tmp_path: Path) -> Path:
    shutil.copytree(BENCH, tmp_path / "benchmarks", ignore=shutil.ignore_patterns("__pycache__", ".*venv"))
    return tmp_path / "benchmarks"


def test_regenerating_the_readme_reproduces_it_byte_for_byte():
    p = harness("readme", "--check")
    assert p.returncode == 0, p.stderr


def test_a_changed_figure_in_a_record_shows_in_the_check(tmp_path):
    bench = copy_of_benchmarks(tmp_path)
    path = bench / "results" / "sampling" / "2026-11-23T0939.json"
    record = json.loads(path.read_text())
    table = next(b["table"] for b in record["blocks"] if "table" in b)
    assert table["rows"][0][1] == "155,118"
    table["rows"][0][1] = "155,119"
    path.write_text(json.dumps(record, indent=1) + "\n")
    p = harness("readme", "--check", cwd=tmp_path)
    assert p.returncode == 1 and "is not what the records give" in p.stderr
    assert harness("readme", cwd=tmp_path).returncode == 0
    assert "| CartPole-v1 | 155,119 | 41,484 |" in (bench / "README.md").read_text()


def test_a_record_without_the_schema_is_named(tmp_path):
    bench = copy_of_benchmarks(tmp_path)
    path = bench / "results" / "scale" / "2026-11-21.json"
    record = json.loads(path.read_text())
    del record["machine"]
    path.write_text(json.dumps(record))
    p = harness("readme", "--check", cwd=tmp_path)
    assert p.returncode == 2 and "results/scale/2026-11-21.json: keys missing ['machine']" in p.stderr
    assert "Traceback" not in p.stderr


def test_every_record_belongs_to_a_benchmark_script():
    names = {line.split()[0] for line in harness().stdout.splitlines()}
    assert {"sampling", "compare_rllib", "overlap", "many_agents"} <= names
    assert "marl_tasks" not in names  # a helper another script runs, not a benchmark
    assert {path.parent.name for path in (BENCH / "results").glob("*/*.json")} <= names


def test_a_run_writes_one_record_with_the_printed_tables(tmp_path):
    copy_of_benchmarks(tmp_path)
    p = harness("--variant", "tiny", "replay", "--capacity", "5000", "--repeats", "1", "--calls", "5", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    [path] = (tmp_path / "runs" / "benchmarks" / "replay").glob("*.json")
    record = json.loads(path.read_text())
    assert record["command"] == ["python -m benchmarks replay --capacity 5000 --repeats 1 --calls 5"]
    assert record["variant"] == "tiny" and record["source"] == "python -m benchmarks"
    assert "CPUs" in record["machine"] and "start -> end" in record["load_avg"]
    [table] = [b["table"] for b in record["blocks"]]
    assert table["headers"][0] == "operation" and len(table["rows"]) == 6
    assert table["rows"][1][0] == "uniform sample" and float(table["rows"][1][1].replace(",", "")) > 0


def test_an_unknown_benchmark_is_one_line():
    p = harness("no_such_bench")
    assert p.returncode == 2 and "no benchmark 'no_such_bench'; there are:" in p.stderr
    assert "Traceback" not in p.stderr


def test_a_bad_variant_is_one_line_before_the_run(tmp_path):
    copy_of_benchmarks(tmp_path)
    p = harness("--variant", "1 thread, loaded", "replay", "--capacity", "5000", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "benchmarks: --variant '1 thread, loaded' may hold letters, digits, '_', '-' and '.'"]
    assert p.stdout == "" and not (tmp_path / "runs").exists()  # nothing ran
