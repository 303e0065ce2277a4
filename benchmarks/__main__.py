"""The benchmark harness: one entry point for every script here, one JSON record per run.

    python -m benchmarks                                    # the benchmarks by group, one line each
    python -m benchmarks [--save] [--variant V] [--title T] NAME [the script's own arguments]
    python -m benchmarks readme [--check]                   # README.md from about.md and results/

The scripts live in three groups (GROUPS): speed/ (marl's throughput, memory and latency against a
baseline in the same run), peers/ (marl side by side with another framework, and the scripts and
setups those run in the peer's venv) and studies/ (learning studies that each answer one question).
NAME is a script's name in any group: names are unique across the groups. A run is
`python benchmarks/GROUP/NAME.py ...` in a child process; the harness then writes its
record (`_records.py`: command, commit, machine, load average, and the tables the script printed
through `_common.print_table`) to runs/benchmarks/, or with --save to benchmarks/results/NAME/,
where `readme` shows the latest of each variant and lists the earlier ones.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the scripts import their helpers flat (`import _common as C`)

import _common  # noqa: E402
import _records  # noqa: E402

GROUPS = {
    "speed": "marl's throughput, memory and latency against a baseline in the same run",
    "peers": "marl side by side with another framework (RLlib, BenchMARL, JaxMARL), the peer in its own venv",
    "studies": "learning studies, each answering one question; their records are the answer",
}
# Scripts another script runs (in its own venv or process), not benchmarks of their own.
HELPERS = {"benchmarl_tasks", "marl_tasks", "rllib_tasks", "jaxmarl_baseline"}
USAGE = "usage: python -m benchmarks [--save] [--variant V] [--title T] NAME [ARGS ...] | readme [--check]"


def scripts() -> dict[str, Path]:
    """name -> path of every script in the groups, helpers included; a name in two groups is an error."""
    out: dict[str, Path] = {}
    for group in GROUPS:
        for path in sorted((HERE / group).glob("*.py")):
            if path.stem.startswith("_"):
                continue
            if path.stem in out:
                raise ValueError(f"benchmarks/{group}/{path.name} and benchmarks/{out[path.stem].parent.name}/"
                                 f"{path.name}: a name is one script, in one group")
            out[path.stem] = path
    return out


def benchmarks() -> dict[str, tuple[str, str]]:
    """name -> (group, the first line of its docstring), for every benchmark script (the helpers left out)."""
    out = {}
    for name, path in scripts().items():
        if name in HELPERS:
            continue
        doc = (ast.get_docstring(ast.parse(path.read_text())) or "").strip()
        out[name] = (path.parent.name, doc.splitlines()[0] if doc else "")
    return out


def _git(*args: str) -> str | None:
    p = subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def commit() -> str | None:
    """The short commit of this checkout, '+changes' when its tracked files differ from it."""
    head = _git("rev-parse", "--short", "HEAD")
    if head and _git("status", "--porcelain", "--untracked-files=no"):
        head += "+changes"
    return head


def load_avg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def run(name: str, args: list[str], variant: str, title: str | None) -> tuple[int, dict]:
    """Runs `python benchmarks/GROUP/NAME.py ARGS`; its exit code and the record of the tables it printed."""
    start_load, started = load_avg(), time.gmtime()
    with tempfile.TemporaryDirectory() as tmp:
        tables_file = Path(tmp) / "tables.jsonl"
        tables_file.touch()
        env = {**os.environ, _common.TABLES_ENV: str(tables_file)}
        code = subprocess.call([sys.executable, str(scripts()[name]), *args], env=env)
        tables = [json.loads(line) for line in tables_file.read_text().splitlines()]
    loads = [f"{x:.2f}" for x in (start_load, load_avg()) if x is not None]
    record = {
        "benchmark": name, "variant": variant, "title": title,
        "date": time.strftime("%Y-%m-%d %H:%M", started),
        "command": [" ".join(["python -m benchmarks", name, *args])],
        "commit": commit(), "machine": _common.machine_line(with_load=False),
        "load_avg": " -> ".join(loads) + " (1 min, start -> end)" if loads else None,
        "source": "python -m benchmarks",
        "blocks": [{"table": table} for table in tables],
    }
    return code, record


def main(argv: list[str]) -> int:
    options = {"--variant": "", "--title": None}
    save = False
    while argv and argv[0].startswith("--"):
        flag = argv.pop(0)
        if flag == "--save":
            save = True
        elif flag in options and argv:
            options[flag] = argv.pop(0)
        else:
            print(f"benchmarks: unknown option {flag!r}\n{USAGE}", file=sys.stderr)
            return 2
    try:
        found = benchmarks()
    except ValueError as e:
        print(f"benchmarks: {e}", file=sys.stderr)
        return 2
    if not argv:
        for group, about in GROUPS.items():
            print(f"{group}/: {about}")
            for name, (where, line) in found.items():
                if where == group:
                    print(f"  {name:22s} {line}")
        return 0
    name, args = argv[0], argv[1:]
    if name == "readme":
        try:
            text = _records.render_readme(HERE, {n: group for n, (group, _) in found.items()})
        except ValueError as e:
            print(f"benchmarks: {e}", file=sys.stderr)
            return 2
        readme = HERE / "README.md"
        if args == ["--check"]:
            if readme.read_text() == text:
                return 0
            print("benchmarks/README.md is not what the records give: run `python -m benchmarks readme`",
                  file=sys.stderr)
            return 1
        readme.write_text(text)
        return 0
    if name not in found:
        print(f"benchmarks: no benchmark {name!r}; there are: {', '.join(sorted(found))}", file=sys.stderr)
        return 2
    if not _records.VARIANT.match(options["--variant"]):  # checked before a run of minutes, not after it
        print(f"benchmarks: --variant {options['--variant']!r} may hold letters, digits, '_', '-' and '.'",
              file=sys.stderr)
        return 2
    code, record = run(name, args, options["--variant"], options["--title"])
    if code != 0:
        print(f"benchmarks: {name} exited with {code}: no record written", file=sys.stderr)
        return code
    if not record["blocks"]:
        print(f"benchmarks: {name} printed no table (_common.print_table): no record written", file=sys.stderr)
        return 1
    results = HERE / "results" if save else HERE.parent / "runs" / "benchmarks"
    print(f"record: {_records.write_record(record, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
