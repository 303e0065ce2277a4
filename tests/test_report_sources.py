"""`marl report` over several sources: runs directories and marl-eval JSON files (a committed report's, a peer's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marl.errors import ConfigError
from marl.experiment.report import write_report
from marl.experiment.report_runs import read_marl_eval, read_sources
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def _runs_dir(root: Path, finals: dict, budget: int = 1000) -> Path:
    """A runs directory as `marl experiment` leaves it: per run four evaluations of three episodes (no training)."""
    root.mkdir(parents=True)
    (root / "suite.yaml").write_text(f"name: fake\nenv_steps: {budget}\n")
    for (task, algo, seed), final in finals.items():
        d = root / task / algo / f"seed_{seed}"
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"task": task, "algorithm": algo, "seed": seed, "family": "vmas"}))
        (d / "done.json").write_text(json.dumps({"env_steps_total": budget}))
        rows = []
        for i, value in enumerate(np.linspace(final / 4, final, 4)):
            episodes = [float(value) - 1.0, float(value), float(value) + 1.0]
            rows.append({"iteration": i + 1, "env_steps_total": budget // 4 * (i + 1), "episode_return_mean": 0.0,
                         "evaluation/episode_return_mean": float(np.mean(episodes)),
                         "evaluation/episode_returns": episodes, "evaluation/episode_lengths": [50, 50, 40]})
        (d / "result.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


FINALS = {("balance", "MAPPO", s): 100.0 + 10 * s for s in range(3)} | {("balance", "IPPO", s): 80.0 + 5 * s for s in range(3)}


def test_a_report_remade_from_its_marl_eval_json_has_the_same_tables_and_json(tmp_path):
    runs = _runs_dir(tmp_path / "runs", FINALS)
    write_report(runs, tmp_path / "first", reps=200, points=4)
    write_report(tmp_path / "first/marl_eval.json", tmp_path / "again", reps=200, points=4)
    first, again = (json.loads((tmp_path / d / "aggregates.json").read_text()) for d in ("first", "again"))
    assert again["tasks"] == first["tasks"] and first["tasks"]["balance"]["MAPPO"]["runs"] == 3
    assert again["grid_env_steps"] == first["grid_env_steps"] == [250, 500, 750, 1000]
    assert (tmp_path / "again/marl_eval.json").read_text() == (tmp_path / "first/marl_eval.json").read_text()


def test_new_seeds_merge_with_a_committed_report_and_a_peers_lower_case_names(tmp_path):
    old = _runs_dir(tmp_path / "old", {k: v for k, v in FINALS.items() if k[2] < 2})
    write_report(old, tmp_path / "committed", reps=200, points=4)
    new = _runs_dir(tmp_path / "new", {k: v for k, v in FINALS.items() if k[2] == 2})
    # a peer's file (BenchMARL's layout: lower-case algorithm, seed_N, its own step counts, no absolute_metrics)
    peer = {"vmas": {"balance": {"qmix": {"seed_0": {f"step_{i}": {"step_count": 300 * (i + 1), "return": [5.0 * i, 5.0 * i + 2]}
                                                      for i in range(3)}}}}}
    (tmp_path / "peer.json").write_text(json.dumps(peer))
    paths = write_report([new, tmp_path / "committed/marl_eval.json", tmp_path / "peer.json"], None, reps=200, points=4)
    assert paths[0] == str(new / "report/results.md")  # the first runs directory's report/
    numbers = json.loads((new / "report/aggregates.json").read_text())
    tasks = numbers["tasks"]["balance"]
    assert {a: e["runs"] for a, e in tasks.items()} == {"MAPPO": 3, "IPPO": 3, "QMIX": 1}  # casing of the runs dir; else upper
    assert tasks["MAPPO"]["mean"][0] == pytest.approx(110.0) and tasks["QMIX"]["mean"][0] == pytest.approx(11.0)
    merged = json.loads((new / "report/marl_eval.json").read_text())["vmas"]["balance"]
    assert sorted(merged) == ["ippo", "mappo", "qmix"] and sorted(merged["mappo"]) == ["seed_0", "seed_1", "seed_2"]
    assert merged["mappo"]["seed_0"] == json.loads((tmp_path / "committed/marl_eval.json").read_text())["vmas"]["balance"]["mappo"]["seed_0"]


def test_an_unfinished_run_that_another_source_holds_finished_is_not_listed_unfinished(tmp_path):
    old = _runs_dir(tmp_path / "old", FINALS)
    write_report(old, tmp_path / "committed", reps=200, points=4)
    new = _runs_dir(tmp_path / "new", {("balance", "MAPPO", 5): 1.0, ("balance", "IPPO", 4): 1.0})
    (new / "balance/MAPPO/seed_5/done.json").unlink()
    found = read_sources([new, tmp_path / "committed/marl_eval.json"])
    assert found.unfinished == ["balance/MAPPO/seed_5"] and len(found.runs) == 7 and found.runs_dir == new


def test_report_sources_refused_in_one_line(tmp_path):
    runs = _runs_dir(tmp_path / "runs", FINALS)
    write_report(runs, tmp_path / "rep", reps=50, points=2)
    (tmp_path / "bad.json").write_text('{"vmas": {"balance": {"mappo": {"seed_0": {"step_0": {"return": [1.0]}}}}}}')
    (tmp_path / "badseed.json").write_text('{"vmas": {"balance": {"mappo": {"best": {}}}}}')
    (tmp_path / "text.json").write_text("not json")
    # a runs directory with no finished run (one started, never done) beside a source that has runs (issue 44 item 5):
    # named in one line whatever the order, nothing written; not merged into a report of the other source's runs alone
    # (mutant run: read_runs returning no runs instead of refusing: rc 0 and a report of the JSON's 6 runs in o/)
    started = _runs_dir(tmp_path / "started", {("balance", "MAPPO", 7): 1.0})
    (started / "balance/MAPPO/seed_7/done.json").unlink()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cases = [
        ([str(started), str(tmp_path / "rep/marl_eval.json"), "-o", str(tmp_path / "o")],
         f"'{started}' holds no finished run"),
        ([str(tmp_path / "rep/marl_eval.json"), str(started), "-o", str(tmp_path / "o")],
         f"'{started}' holds no finished run"),
        ([str(runs), str(tmp_path / "empty_dir"), "-o", str(tmp_path / "o")], "empty_dir' holds no finished run"),
        ([str(runs), str(tmp_path / "rep/marl_eval.json")], "is in both"),  # the same run twice: never chosen silently
        ([str(tmp_path / "bad.json"), "-o", str(tmp_path / "o")], "needs 'step_count' and 'return'"),
        ([str(tmp_path / "badseed.json"), "-o", str(tmp_path / "o")], "'best' is not a run key"),
        ([str(tmp_path / "text.json"), "-o", str(tmp_path / "o")], "not a readable JSON file"),
        ([str(tmp_path / "rep/marl_eval.json")], "--output is needed"),
        ([str(tmp_path / "missing.json")], "does not exist"),
    ]
    (tmp_path / "empty_dir").mkdir()
    for args, message in cases:
        p = subprocess.run([sys.executable, "-m", "marl.cli", "report", *args, "--reps", "20"], cwd=ROOT,
                           capture_output=True, text=True, timeout=HANG_S, env=env)
        assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, (args, p.stderr[-500:])
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert not (tmp_path / "o").exists() and not (started / "report").exists()  # nothing written
    with pytest.raises(ConfigError, match="holds no run"):
        (tmp_path / "empty.json").write_text("{}")
        read_marl_eval(tmp_path / "empty.json")


def test_score_training_reads_the_exploring_returns_where_the_greedy_ones_differ(tmp_path):
    """A policy that still acts through its noise (MaMuJoCo at 100k env steps: greedy ~0, exploring ~390) is judged
    by its training returns with `score="training"`: the curve every iteration's, the score the last 10 %'s mean."""
    root = tmp_path / "runs"
    root.mkdir()
    (root / "suite.yaml").write_text("name: fake\nenv_steps: 2000\n")
    for seed in range(2):
        d = root / "cheetah" / "HAPPO" / f"seed_{seed}"
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"task": "cheetah", "algorithm": "HAPPO", "seed": seed}))
        (d / "done.json").write_text(json.dumps({"env_steps_total": 2000}))
        rows = [{"env_steps_total": 100 * i, "episode_return_mean": 10.0 * i + seed}
                | ({"evaluation/episode_return_mean": -float(i)} if i % 10 == 0 else {}) for i in range(1, 21)]
        (d / "result.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    greedy, training = read_sources(root).runs, read_sources(root, "training").runs
    assert [run.final for run in greedy] == [-20.0, -20.0]
    assert [run.final for run in training] == [195.0, 196.0]  # iterations 19 and 20 (steps above 1,800)
    assert len(training[0].steps) == 20 and len(greedy[0].steps) == 2
    write_report(root, tmp_path / "report", reps=50, points=4, score="training")
    assert "Score: the exploring policy's training return" in (tmp_path / "report" / "results.md").read_text()
    with pytest.raises(ConfigError, match="--score must be one of"):
        write_report(root, tmp_path / "other", reps=50, points=4, score="greedy")
