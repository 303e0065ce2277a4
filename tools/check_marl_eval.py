"""Loads a `marl report` marl_eval.json with marl-eval's own loader, as a marl-eval user would.

    python tools/check_marl_eval.py RUNS_DIR/report/marl_eval.json

Run it with a Python that has marl-eval (`id-marl-eval` on PyPI). marl-eval is not a marl dependency:
0.0.4 pins pandas==1.4.4 and its repository's head pins numpy<2 (marl needs numpy 2 and pandas 2), so
it lives in a venv of its own; its loader needs only numpy and colorama:

    python3.11 -m venv /tmp/marl-eval && /tmp/marl-eval/bin/pip install 'numpy<2' colorama
    /tmp/marl-eval/bin/pip install --no-deps id-marl-eval==0.0.4

Checks, per environment: `DiagnoseData.check_data` finds every flag valid; `data_process_pipeline`
processes the file (it prints and returns its input unchanged on a layout it cannot read, so the
`extra` entry it adds is checked); `create_matrices_for_rliable` gives (runs x tasks) final-score
matrices and (runs x tasks x steps) curves for `return` (normalised) and `episode_length`, whose
values are the means of the file's per-episode lists. Exit status 0 when all hold.
"""

from __future__ import annotations

import copy
import json
import sys

import numpy as np


def check(path: str) -> list[str]:
    from marl_eval.utils.data_processing_utils import create_matrices_for_rliable, data_process_pipeline
    from marl_eval.utils.diagnose_data_errors import DiagnoseData

    raw = json.load(open(path))
    problems = []
    for env, flags in DiagnoseData(copy.deepcopy(raw)).check_data().items():
        problems += [f"{env}: DiagnoseData {name} is False" for name, ok in flags.items() if not ok]
    processed = data_process_pipeline(copy.deepcopy(raw), metrics_to_normalize=["return"])
    if "extra" not in processed:
        return problems + ["data_process_pipeline could not read the file (see its message above)"]
    for env, tasks in raw.items():
        try:
            finals, curves = create_matrices_for_rliable(copy.deepcopy(processed), env, ["return"])
        except Exception as err:  # marl-eval's own message is printed above
            problems.append(f"{env}: create_matrices_for_rliable failed: {type(err).__name__}: {err}")
            continue
        algorithms = list(next(iter(tasks.values())))
        runs = list(next(iter(tasks.values()))[algorithms[0]])
        steps = [k for k in next(iter(tasks.values()))[algorithms[0]][runs[0]] if k.startswith("step_")]
        for metric in ("mean_norm_return", "mean_episode_length"):
            if metric not in finals:
                problems.append(f"{env}: marl-eval found no {metric} (metrics: {sorted(finals)})")
                continue
            for algo in algorithms:
                shape, curve_shape = finals[metric][algo].shape, curves[metric][algo].shape
                if shape != (len(runs), len(tasks)) or curve_shape != (len(runs), len(tasks), len(steps)):
                    problems.append(f"{env}/{algo}/{metric}: matrices {shape} and {curve_shape}, expected "
                                    f"{(len(runs), len(tasks))} and {(len(runs), len(tasks), len(steps))}")
        for j, (task, algos) in enumerate(tasks.items()):  # marl-eval's numbers are the means of our lists
            for algo, seeds in algos.items():
                for i, run_name in enumerate(runs):  # marl-eval's row order: the first task's first algorithm's runs
                    run = seeds[run_name]
                    want = np.mean(run["absolute_metrics"]["episode_length"])
                    got = finals["mean_episode_length"][algo][i][j]
                    if not np.isclose(got, want):
                        problems.append(f"{env}/{task}/{algo}/run {i}: marl-eval's final episode length {got} != {want}")
        print(f"{env}: {len(tasks)} tasks x {len(algorithms)} algorithms x {len(runs)} runs x {len(steps)} steps read "
              f"by marl-eval; IQM-ready matrices for {sorted(m for m in finals if m != 'extra')}")
    return problems


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[2].strip())
    found = check(sys.argv[1])
    for line in found:
        print("marl-eval:", line, file=sys.stderr)
    sys.exit(1 if found else 0)
