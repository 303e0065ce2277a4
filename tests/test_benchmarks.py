"""The benchmark harness: benchmarks/README.md is what the committed records give, a run writes a record, the scripts
sit in their groups (speed/, peers/, studies/), and every benchmarks/... path the repo names exists."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
GROUPS = ("speed", "peers", "studies")


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


def listing() -> dict[str, str]:
    """name -> group, from `python -m benchmarks`: a `GROUP/: ...` line, then its scripts indented."""
    out, group = {}, None
    for line in harness().stdout.splitlines():
        if line.startswith("  "):
            out[line.split()[0]] = group
        else:
            group = line.split("/:")[0]
    return out


def test_the_listing_shows_each_benchmark_under_its_group_and_every_record_belongs_to_one():
    names = listing()
    assert set(names.values()) == set(GROUPS)
    assert {n: names[n] for n in ("sampling", "compare_rllib", "spread_gamma")} == {
        "sampling": "speed", "compare_rllib": "peers", "spread_gamma": "studies"}
    assert "marl_tasks" not in names  # a helper another script runs, not a benchmark
    assert {path.parent.name for path in (BENCH / "results").glob("*/*.json")} <= set(names)
    assert not [p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")]  # no script left at the top


def test_each_group_puts_the_shared_helpers_on_the_path_alike():
    [text] = {(BENCH / group / "_path.py").read_text() for group in GROUPS}
    for group in GROUPS:
        p = subprocess.run([sys.executable, "-c", "import _path, _common; print(_common.__file__)"],
                           cwd=BENCH / group, capture_output=True, text=True, timeout=HANG_S)
        assert p.returncode == 0 and Path(p.stdout.strip()) == BENCH / "_common.py", p.stderr


def test_each_peer_comparison_prints_its_tables_for_the_record():
    """`python -m benchmarks --save NAME` keeps what a script prints through _common.print_table (directly or through
    _peer_curves.tables): every peer comparison does, so each writes the common record and its README table."""
    for name, group in listing().items():
        if group == "peers":
            text = (BENCH / "peers" / f"{name}.py").read_text()
            assert "C.print_table(" in text or re.search(r"from _peer_curves import .*\btables\b", text), name


def test_a_section_under_another_group_and_a_name_in_two_groups_are_one_line(tmp_path):
    bench = copy_of_benchmarks(tmp_path)
    shutil.move(bench / "speed" / "sampling.py", bench / "studies" / "sampling.py")
    p = harness("readme", "--check", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "benchmarks: benchmarks/about.md: section \"### The env's own limit (`sampling.py`)\" is under speed/, "
        "its script in studies/"]
    shutil.copy(bench / "studies" / "sampling.py", bench / "peers" / "sampling.py")
    p = harness(cwd=tmp_path)
    assert p.returncode == 2 and "sampling.py: a name is one script, in one group" in p.stderr
    assert "Traceback" not in p.stderr


# A path like benchmarks/speed/sampling.py, not one inside another path (/work/wt/x/benchmarks/...): the placeholders
# of usage lines (benchmarks/GROUP/NAME.py) are not paths.
PATH = re.compile(r"(?<![\w/.-])benchmarks/(?:[\w-]+/)*[\w-]+\.(?:py|sh|md)\b")
# What the repo keeps as it was measured or written then: the records (and the README made of them), peers' raw output.
KEPT = re.compile(r"^(benchmarks/results/|benchmarks/README\.md$|docs/results/.*\.json$)")


def repo_files() -> list[str]:
    """The repo's files, tracked or new (not ignored), that are there."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [name for name in listed if (ROOT / name).is_file()]


def named_paths() -> set[tuple[str, str]]:
    """(file, path) of every benchmarks/... path named in the repo's tracked text files (docs, code, configs, tests)."""
    files = repo_files()
    out = set()
    for name in files:
        if KEPT.match(name) or name == "tests/test_benchmarks.py":
            continue  # (this file names the stale paths above)
        try:
            text = (ROOT / name).read_text()
        except UnicodeDecodeError:
            continue
        out |= {(name, path) for path in PATH.findall(text) if not re.search(r"/[A-Z]+[/.]", path)}
    return out


def test_every_benchmarks_path_the_repo_names_exists():
    named = named_paths()
    assert ("docs/batched.md", "benchmarks/speed/agent_scaling.py") in named  # the scan sees the docs
    dead = {(f, p) for f, p in named if not (ROOT / p).exists()}
    assert not dead, "dead paths (file, path):\n" + "\n".join(map(str, sorted(dead)))


def test_every_benchmark_a_command_in_the_repo_runs_exists():
    """`python -m benchmarks [--save] [--variant V] NAME`: NAME is a benchmark (or `readme`) in the docs and code."""
    names = set(listing()) | {"readme"}
    command = re.compile(r"-m benchmarks((?: +--save| +--variant +\S+)*) +([a-z]\w*)")
    files = repo_files()
    seen = set()
    for name in files:
        if KEPT.match(name) or not name.endswith((".md", ".py", ".sh", ".yaml")):
            continue
        for match in command.finditer((ROOT / name).read_text()):
            seen.add(match.group(2))
            assert match.group(2) in names, f"{name}: `python -m benchmarks ... {match.group(2)}` runs no benchmark"
    assert {"sampling", "mat_vs_mappo", "readme"} <= seen


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
