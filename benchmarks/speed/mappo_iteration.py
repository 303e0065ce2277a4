"""marl's MAPPO iteration against IPPO's, and against an earlier revision of marl, side by side.

    .venv/bin/python benchmarks/speed/mappo_iteration.py [--before REV] [--repeats 3] [--iterations 6]

simple_spread (scenarios/simple_spread_mappo.yaml and simple_spread_ppo.yaml: 8 envs, 2,048 env
steps = 6,144 agent rows per iteration, 5 epochs of 512-row minibatches, [128, 128] tanh, shared
policy; in-process sampling, synchronous). Every run is a fresh process (OMP_NUM_THREADS=1) that
trains `--iterations` iterations after one warm-up iteration and prints, per iteration, the
wall time, the process's CPU time (the steadier figure on a loaded machine: it leaves out the time the
process waited for a core) and the workflow's own `perf/sample_time_s` and `perf/learn_time_s` (wall). The runs of one
repeat go back to back (MAPPO and IPPO of this tree; with `--before REV` also both of REV,
exported with `git archive` into a temporary folder), their order rotating with the repeat, so
load from elsewhere hits them alike. Reports the median over all iterations of all repeats and
the ratios: MAPPO / IPPO (MAPPO's extra cost) in each tree, and this tree / REV.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

SCENARIOS = {"MAPPO": "scenarios/simple_spread_mappo.yaml", "IPPO": "scenarios/simple_spread_ppo.yaml"}
FIGURES = ("iter_s", "cpu_s", "sample_s", "learn_s")

CHILD = r"""
import json, sys, time
import marl
scenario, iterations = sys.argv[1], int(sys.argv[2])
algo = marl.load_scenario(scenario).build()
try:
    algo.train()  # warm-up: first-call costs are not the iteration's
    for _ in range(iterations):
        t, c = time.perf_counter(), time.process_time()
        r = algo.train()
        print(json.dumps({"iter_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
                          "sample_s": r["perf/sample_time_s"], "learn_s": r["perf/learn_time_s"]}), flush=True)
finally:
    algo.stop()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default=None, help="a git revision to measure beside this working tree")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=6, help="timed iterations per run (after one warm-up)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"mappo_iteration: {C.machine_line()}", flush=True)
    trees = {"this tree": C.REPO_ROOT}
    if args.before:
        trees[f"before ({args.before})"] = C.export_revision(args.before)
    jobs = [(tree, algo) for tree in trees for algo in SCENARIOS]
    times: dict[tuple[str, str], list[dict]] = {job: [] for job in jobs}
    loads = []
    for repeat in range(args.repeats):
        order = jobs[repeat % len(jobs):] + jobs[: repeat % len(jobs)]
        for tree, algo in order:
            loads.append(os.getloadavg()[0])
            rows = C.run_in_tree(trees[tree], CHILD, [str(trees[tree] / SCENARIOS[algo]), str(args.iterations)], algo)
            times[(tree, algo)] += rows
            print(f"  repeat {repeat} {tree:>24} {algo}: iteration {C.median([r['iter_s'] for r in rows]):.3f} s "
                  f"(load {loads[-1]:.1f})", flush=True)

    def med(tree, algo, figure):
        return C.median([r[figure] for r in times[(tree, algo)]])

    rows = [[f"{algo} ({tree})", *(f"{med(tree, algo, f):.3f}" for f in FIGURES)] for tree, algo in jobs]
    C.print_table(["run", "iteration s", "iteration CPU s", "sample s", "learn s"], rows,
                  title=f"median over {args.repeats} x {args.iterations} iterations (load avg {min(loads):.1f}-{max(loads):.1f})")
    ratios = [[f"MAPPO / IPPO ({tree})", *(f"{med(tree, 'MAPPO', f) / med(tree, 'IPPO', f):.3f}" for f in FIGURES)]
              for tree in trees]
    if args.before:
        before = next(t for t in trees if t != "this tree")
        ratios += [[f"{algo}: this tree / before", *(f"{med('this tree', algo, f) / med(before, algo, f):.3f}" for f in FIGURES)]
                   for algo in SCENARIOS]
    C.print_table(["ratio", "iteration", "iteration CPU", "sample", "learn"], ratios, title="ratios (lower is faster)")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": C.machine_line(), "args": vars(args), "loads": loads,
                                               "runs": {f"{t}|{a}": v for (t, a), v in times.items()}}, indent=1))


if __name__ == "__main__":
    main()
