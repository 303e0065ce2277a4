"""A corpus of bad scenario files: each fails with its own one-line message naming the key or the agent.

Every file in tests/bad_scenarios/ starts with `# expect: <text>` lines; `marl
train` on it must exit non-zero and print one line on stderr, without a
traceback, that contains every expected text. Env-output faults come from
tests/bad_envs.py under `debugging: {validate_env: true}`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from marl import cli
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "tests" / "bad_scenarios").glob("*.yaml"))
if str(ROOT) not in sys.path:  # the scenarios name their env by module path: tests.bad_envs
    sys.path.insert(0, str(ROOT))


def expectations(path: Path) -> list[str]:
    return [line[len("# expect:"):].strip() for line in path.read_text().splitlines() if line.startswith("# expect:")]


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 25
    assert all(expectations(p) for p in CORPUS)


def train_error(path: Path, tmp_path: Path, capsys) -> tuple[int, str]:
    code = cli.main(["train", str(path), "--quiet", "--output", str(tmp_path / "run")])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_bad_scenario_gives_its_own_clear_message(path, tmp_path, capsys):
    code, err = train_error(path, tmp_path, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("marl: error: ")
    for text in expectations(path):
        assert text in lines[0], f"{path.name}: expected {text!r} in {lines[0]!r}"


def test_every_message_is_specific(tmp_path, capsys):
    """No two files of the corpus produce the same message."""
    messages = {}
    for path in CORPUS:
        _, err = train_error(path, tmp_path / path.stem, capsys)
        messages[path.stem] = err.strip()
    assert len(set(messages.values())) == len(messages), messages


@pytest.mark.parametrize("name", ["unknown_training_key", "policy_without_agents", "env_obs_outside"])
def test_cli_process_prints_one_line_without_traceback(name, tmp_path):
    p = subprocess.run([sys.executable, "-m", "marl.cli", "train", f"tests/bad_scenarios/{name}.yaml", "--quiet",
                        "--output", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    for text in expectations(ROOT / "tests" / "bad_scenarios" / f"{name}.yaml"):
        assert text in p.stderr


def test_without_validate_env_a_bad_observation_goes_unchecked(tmp_path, capsys):
    """The per-step checks cost time, so they are opt-in: the same env trains when they are off."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text((ROOT / "tests" / "bad_scenarios" / "env_obs_outside.yaml").read_text()
                        .replace("debugging: {validate_env: true}", ""))
    assert cli.main(["train", str(scenario), "--quiet", "--output", str(tmp_path / "run")]) == 0
