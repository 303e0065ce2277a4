"""Where the suite's time goes, per file, from a run's `--durations=0` lines (README's test command + `--durations=0`).

    .venv/bin/python -m pytest -m "slow or not slow" -q -n 2 --dist loadfile --durations=0 > suite.log
    .venv/bin/python tests/durations.py suite.log [--top 25] [--workers 2]

Prints each file's worker-seconds (its tests' setup + call + teardown), its test count and longest test, largest
first, and the makespan `--dist loadfile` could reach with that many workers (files dealt longest first to the
least loaded worker): a file longer than the total over the workers sets the suite's time by itself.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

LINE = re.compile(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+?\.py)::(\S.*)$")


def per_file(lines) -> dict[str, dict]:
    files: dict[str, dict] = defaultdict(lambda: {"seconds": 0.0, "tests": set(), "longest": (0.0, "")})
    for line in lines:
        match = LINE.match(line.strip())
        if not match:
            continue
        seconds, _, path, test = float(match[1]), match[2], match[3], match[4]
        entry = files[path]
        entry["seconds"] += seconds
        entry["tests"].add(test)
        entry["longest"] = max(entry["longest"], (seconds, test))
    return dict(files)


def loadfile_makespan(seconds: list[float], workers: int) -> float:
    loads = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with open(args.log) as f:
        files = per_file(f)
    if not files:
        raise SystemExit(f"{args.log}: no duration lines (run pytest with --durations=0)")
    total = sum(e["seconds"] for e in files.values())
    ranked = sorted(files.items(), key=lambda kv: -kv[1]["seconds"])
    print(f"{len(files)} files, {sum(len(e['tests']) for e in files.values())} tests timed, {total / 60:.1f} worker-minutes; "
          f"loadfile makespan on {args.workers} workers >= {loadfile_makespan([e['seconds'] for e in files.values()], args.workers) / 60:.1f} min")
    print(f"{'worker-s':>9} {'share':>6} {'tests':>5}  file (longest test)")
    for path, e in ranked[:args.top]:
        seconds, test = e["longest"]
        print(f"{e['seconds']:9.0f} {e['seconds'] / total:6.1%} {len(e['tests']):5d}  {path} ({test[:60]}: {seconds:.0f} s)")


if __name__ == "__main__":
    main()
