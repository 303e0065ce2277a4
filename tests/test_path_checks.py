"""Every path argument and path-valued key is checked before work starts: one line naming the argument and the
problem, no traceback, nothing created or changed. Tests run as root, so an unwritable output is one under an
existing *file*."""

from __future__ import annotations

import json

import pytest

from marl import cli

SCENARIO = "scenarios/cartpole_ppo.yaml"


@pytest.fixture
def tree(tmp_path):
    """A file, a folder, a fake run directory and a fake checkpoint to point arguments at."""
    (tmp_path / "file.py").write_text("print('mine')\n")
    (tmp_path / "folder").mkdir()
    run = tmp_path / "run"
    (run / "checkpoint").mkdir(parents=True)
    (run / "config.yaml").write_text("algo: PPO\n")
    (run / "checkpoint" / "manifest.json").write_text(json.dumps({"schema_version": 2}))
    (tmp_path / "suite.yaml").write_text("name: s\n")
    return tmp_path


CASES = [
    # (argv with {t} for the tree, the one line expected after "marl: error: ")
    (["train", SCENARIO, "--output", "{t}/file.py"], "--output {t}/file.py: is an existing file, not a folder (a run directory goes there)"),
    (["train", SCENARIO, "--output", "{t}/file.py/run"], "--output {t}/file.py/run: cannot be created: '{t}/file.py' is a file, not a folder"),
    (["train", "{t}/folder"], "scenario {t}/folder: is a folder, not a file"),
    (["train", "{t}/missing.yaml"], "scenario {t}/missing.yaml: does not exist"),
    (["train", "--resume", "{t}/file.py"], "--resume {t}/file.py: is a file, not a run directory"),
    (["train", "--resume", "{t}/missing"], "--resume {t}/missing: does not exist"),
    (["train", "--resume", "{t}/folder"], "--resume {t}/folder: is not a run directory (it has no config.yaml)"),
    (["train", "--resume", "{t}/run", "--output", "{t}/run/again"], "--output {t}/run/again: is inside --resume {t}/run, which this command reads: write elsewhere"),
    (["train", SCENARIO, "offline.output={t}/file.py"], "offline.output {t}/file.py: is an existing file, not a folder (a folder goes there)"),
    (["train", SCENARIO, "offline.output={t}/file.py/rows"], "offline.output {t}/file.py/rows: cannot be created: '{t}/file.py' is a file, not a folder"),
    (["train", SCENARIO, "offline.input={t}/missing"], "offline.input {t}/missing: does not exist"),
    (["train", SCENARIO, "offline.input={t}/*.parquet"], "offline.input {t}/*.parquet: matches no file"),
    (["train", SCENARIO, "offline.input={t}/folder", "offline.output={t}/folder/out"], "offline.output {t}/folder/out: is inside offline.input {t}/folder, which this command reads: write elsewhere"),
    (["evaluate", "{t}/run/checkpoint", "--record", "{t}/run/checkpoint/episodes"], "--record {t}/run/checkpoint/episodes: is inside CHECKPOINT {t}/run/checkpoint, which this command reads: write elsewhere"),
    (["evaluate", "{t}/run/checkpoint", "--record", "{t}/file.py"], "--record {t}/file.py: is an existing file, not a folder (a folder goes there)"),
    (["graph", SCENARIO, "--output", "{t}/folder"], "--output {t}/folder: is an existing folder, not a file name"),
    (["graph", SCENARIO, "-o", "{t}/file.py/g.png"], "--output {t}/file.py/g.png: cannot be created: '{t}/file.py' is a file, not a folder"),
    (["plot", "{t}/file.py"], "RUN_DIR {t}/file.py: is a file, not a run directory"),
    (["plot", "{t}/run", "-o", "{t}/file.py"], "--output {t}/file.py: is an existing file, not a folder (a folder goes there)"),
    (["experiment", "{t}/folder"], "suite {t}/folder: is a folder, not a file"),
    (["experiment", "{t}/suite.yaml", "--output", "{t}/file.py"], "--output {t}/file.py: is an existing file, not a folder (a runs directory goes there)"),
    (["report", "{t}/missing"], "SOURCE {t}/missing: does not exist"),
    (["report", "{t}/run", "-o", "{t}/file.py/r"], "--output {t}/file.py/r: cannot be created: '{t}/file.py' is a file, not a folder"),
    (["serve", "{t}/missing.yaml"], "scenario {t}/missing.yaml: does not exist"),
    (["serve", SCENARIO, "--output", "{t}/file.py"], "--output {t}/file.py: is an existing file, not a folder (a run directory goes there)"),
]


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_a_bad_path_is_one_line_before_any_work(tree, argv, expected, capsys):
    before = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    code = cli.main([a.format(t=tree) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.strip().splitlines() == [f"marl: error: {expected.format(t=tree)}"], err
    assert "Traceback" not in err and "serving" not in out
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == before  # nothing created, nothing lost
    assert (tree / "file.py").read_text() == "print('mine')\n"
