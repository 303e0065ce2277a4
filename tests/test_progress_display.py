"""The live progress display: rich's redrawn rows under a pseudo-terminal, plain lines without one."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from marl.logging.live import ProgressDisplay, stop_share
from marl.logging.progress import progress_line
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SMALL = ["env_runners.num_envs_per_env_runner=2", "env_runners.rollout_fragment_length=64",
         "training.train_batch_size=128", "training.num_epochs=1", "stop.iterations=4", "stop.episode_return_mean=null",
         "stop.env_steps_total=null", "loggers.tensorboard=false"]


def _run_in_pty(args: list[str], timeout: float = HANG_S) -> tuple[int, str]:
    """Runs a command with stdout and stderr on a pseudo-terminal (as in a terminal window); returns (code, output)."""
    controller, terminal = pty.openpty()
    os.set_blocking(controller, False)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "TERM": "xterm-256color"}
    proc = subprocess.Popen(args, cwd=ROOT, stdin=terminal, stdout=terminal, stderr=terminal, env=env, close_fds=True)
    os.close(terminal)
    chunks, deadline = [], time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.2)
        if ready:
            try:
                data = os.read(controller, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=HANG_S)
    os.close(controller)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_train_under_a_terminal_draws_a_live_row(tmp_path):
    code, out = _run_in_pty([sys.executable, "-m", "marl.cli", "train", "scenarios/cartpole_ppo.yaml", *SMALL,
                             "--output", str(tmp_path / "run")])
    assert code == 0, out[-2000:]
    assert "\r" in out and "\x1b[" in out  # redrawn in place, with terminal control codes
    plain = ANSI.sub("", out)
    rows = [r for r in re.split(r"[\r\n]+", plain) if r.startswith("run ") and "env_steps" in r]
    assert rows, plain[-2000:]
    final = rows[-1]
    assert "100%" in final and "env_steps       512" in final and "steps/s" in final and "ETA" in final
    assert re.search(r"return\s+\d+\.\d", final)
    assert "━" in plain  # rich's progress bar
    assert not re.search(r"^iter\s+\d", plain, re.M)  # no plain progress lines on a terminal
    assert "stopped: iterations 4 >= 4" in plain


def test_train_without_a_terminal_prints_plain_lines(tmp_path):
    p = subprocess.run([sys.executable, "-m", "marl.cli", "train", "scenarios/cartpole_ppo.yaml", *SMALL,
                        "--output", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=HANG_S,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert "\x1b[" not in p.stdout and "\r" not in p.stdout
    lines = [line for line in p.stdout.splitlines() if line.startswith("iter")]
    assert len(lines) == 4 and "env_steps      512" in lines[-1] and "stop: iterations 4/4 (100%)" in lines[-1]


def test_display_rows_track_several_runs_and_their_progress(monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # rich's width off a real terminal
    stream = io.StringIO()
    stream.isatty = lambda: True  # a terminal as far as the display can tell
    stop = SimpleNamespace(episode_return_mean=None, env_steps_total=1000, time_total_s=None, iterations=None)
    with ProgressDisplay(stream) as display:
        display.start("a/PPO/seed_0")
        display.update("a/PPO/seed_0", {"env_steps_total": 250, "episode_return_mean": -61.25, "env_steps_per_s": 900.0,
                                        "iteration": 1, "time_total_s": 1.0}, stop)
        display.update("b/QMIX/seed_1", {"env_steps_total": 500, "episode_return_mean": float("nan"),
                                         "env_steps_per_s": 400.0, "iteration": 1, "time_total_s": 1.0}, stop)
        display.finish("b/QMIX/seed_1", "finished")
        display.message("a message above the rows")
    out = ANSI.sub("", stream.getvalue())
    assert "a/PPO/seed_0" in out and " 25%" in out and "-61.2" in out and "900 steps/s" in out
    assert "b/QMIX/seed_1" in out and "100%" in out and "finished" in out and "a message above the rows" in out


def test_plain_display_prefixes_run_names_for_suites():
    stream = io.StringIO()
    stop = SimpleNamespace(episode_return_mean=None, env_steps_total=1000, time_total_s=None, iterations=None)
    display = ProgressDisplay(stream, prefix_names=True)
    assert not display.live
    display.update("a/PPO/seed_0", {"env_steps_total": 250, "iteration": 1, "time_total_s": 1.0}, stop)
    display.finish("a/PPO/seed_0", "finished")
    assert stream.getvalue().splitlines() == [
        "[a/PPO/seed_0] iter    1  env_steps      250  return     nan  env_steps/s    nan  elapsed 0:00:01  "
        "stop: env_steps 250/1000 (25%)",
        "[a/PPO/seed_0] finished",
    ]


def test_stop_share_is_the_closest_criterion():
    stop = SimpleNamespace(episode_return_mean=450.0, env_steps_total=1000, time_total_s=None, iterations=10)
    assert stop_share({"episode_return_mean": 90.0, "env_steps_total": 100, "iteration": 7}, stop) == 0.7
    assert stop_share({"episode_return_mean": float("nan"), "env_steps_total": 2000}, stop) == 1.0
    none = SimpleNamespace(episode_return_mean=None, env_steps_total=None, time_total_s=None, iterations=None)
    assert stop_share({"env_steps_total": 5}, none) == 0.0


def test_iterations_without_a_finished_episode_say_so_instead_of_nan():
    stop = SimpleNamespace(episode_return_mean=10.0, env_steps_total=None, time_total_s=None, iterations=None)
    none_yet = {"iteration": 1, "env_steps_total": 100, "episode_return_mean": float("nan"), "episodes_this_iter": 0,
                "episodes_total": 0, "env_steps_per_s": 50.0, "time_total_s": 2.0}
    line = progress_line(none_yet, stop)
    assert "return: no episode finished yet" in line and "nan" not in line and "return -/10.0" in line
    later = dict(none_yet, iteration=3, episodes_total=4)
    assert "return: no episode finished this iteration" in progress_line(later, stop)
    finished = dict(none_yet, episode_return_mean=3.5, episodes_this_iter=2, episodes_total=2)
    assert "return     3.5" in progress_line(finished, stop)
    stream = io.StringIO()
    stream.isatty = lambda: True
    with ProgressDisplay(stream) as display:
        display.update("vmas", none_yet, stop)
    assert "no episode yet" in ANSI.sub("", stream.getvalue())


def test_a_negative_return_target_shows_the_distance_not_a_share():
    """Pendulum's -200: -1357.8 is far from it, not 100% of the way (the old line said `(100%)`)."""
    stop = SimpleNamespace(episode_return_mean=-200.0, env_steps_total=None, time_total_s=None, iterations=None)
    result = {"iteration": 1, "env_steps_total": 200, "episode_return_mean": -1357.8, "episodes_total": 1,
              "episodes_this_iter": 1, "env_steps_per_s": 50.0, "time_total_s": 2.0}
    assert progress_line(result, stop).endswith("stop: return -1357.8/-200.0 (1157.8 to go)")
    assert progress_line(dict(result, episode_return_mean=-150.0), stop).endswith("stop: return -150.0/-200.0 (met)")
    positive = SimpleNamespace(episode_return_mean=450.0, env_steps_total=None, time_total_s=None, iterations=None)
    assert progress_line(dict(result, episode_return_mean=90.0), positive).endswith("stop: return 90.0/450.0 (20%)")
    assert progress_line(dict(result, episode_return_mean=-90.0), positive).endswith("stop: return -90.0/450.0 (0%)")
    assert stop_share(result, stop) == 0.0


def test_an_offline_run_shows_its_evaluation_return():
    """BC/MARWIL/CQL sample no episodes: the line shows the evaluation's return when one ran, and says when none did."""
    stop = SimpleNamespace(episode_return_mean=None, env_steps_total=None, time_total_s=None, iterations=3)
    offline = {"iteration": 1, "env_steps_total": 2000, "episode_return_mean": float("nan"), "episodes_total": 0,
               "episodes_this_iter": 0, "counters/offline/rows_read": 2000, "env_steps_per_s": 50.0, "time_total_s": 2.0}
    line = progress_line(offline, stop)
    assert "return: offline, no evaluation this iteration" in line and "no episode finished" not in line
    evaluated = dict(offline, iteration=2, **{"evaluation/episode_return_mean": 187.3})
    assert "return (evaluation) 187.3" in progress_line(evaluated, stop)
    stream = io.StringIO()
    stream.isatty = lambda: True
    with ProgressDisplay(stream) as display:
        display.update("bc", evaluated, stop)
    assert "187.3 (evaluation)" in ANSI.sub("", stream.getvalue())
