"""Preemption: SIGTERM/SIGINT let the iteration in flight finish, write the checkpoint, and `--resume` goes on
having lost nothing; `checkpointing.checkpoint_every_s` saves by time beside the iteration count.

The signals come from the env at a known step (tests/signal_envs.py) or from the test after a line the run
printed: no test waits for a time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import marl
from marl.runtime.run_loop import RunInterrupted, config_for_resume, train_run
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
STEPS_PER_ITERATION = 40  # env steps: 80 agent steps of the two agents, one env copy


def signalling_config(at_step: int, runners: int = 0, signum=signal.SIGTERM):
    return (
        marl.PPOConfig()
        .environment("tests.signal_envs", env_config={"pid": os.getpid(), "at_step": at_step, "signum": int(signum)})
        .env_runners(num_env_runners=runners, num_envs_per_env_runner=1, rollout_fragment_length=STEPS_PER_ITERATION)
        .training(train_batch_size=2 * STEPS_PER_ITERATION, minibatch_size=40, num_epochs=1)
        .checkpointing(checkpoint_frequency=0, checkpoint_every_s=0)
        .stopping(iterations=5)
        .debugging(seed=1)
    )


def iterations_logged(run_dir: Path) -> list[int]:
    return [json.loads(line)["iteration"] for line in (run_dir / "result.jsonl").read_text().splitlines()]


def checkpoint_iteration(run_dir: Path) -> int:
    return json.loads((run_dir / "checkpoint" / "manifest.json").read_text())["iteration"]


def interrupt_and_resume(run_dir: Path, config, resume_overrides: tuple[str, ...] = ()):
    """Signalled halfway through iteration 3: iteration 3 finishes and is saved; the resumed run trains 4 and 5."""
    lines = []
    run_dir.mkdir()
    with pytest.raises(RunInterrupted) as stopped:
        train_run(config, run_dir, echo=lines.append)
    assert iterations_logged(run_dir) == [1, 2, 3] and checkpoint_iteration(run_dir) == 3
    assert str(stopped.value).startswith("SIGTERM: stopped after iteration 3; checkpoint: ")
    assert f"marl train --resume {run_dir.resolve()}" in str(stopped.value)
    assert any(line.startswith("SIGTERM: finishing the current iteration") for line in lines)
    resumed = config_for_resume(run_dir, ["environment.env_config.pid=0", *resume_overrides])
    reason = train_run(resumed, run_dir, resume=True, echo=lines.append)
    assert reason == "iterations 5 >= 5"
    rows = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]  # each once: nothing lost, nothing repeated
    assert [r["env_steps_total"] for r in rows] == [STEPS_PER_ITERATION * i for i in range(1, 6)]
    assert any(line.startswith("resumed from") and "at iteration 3" in line for line in lines)


def test_sigterm_mid_iteration_finishes_it_saves_and_resumes(tmp_path):
    interrupt_and_resume(tmp_path / "run", signalling_config(at_step=2 * STEPS_PER_ITERATION + 5))


def test_sigterm_mid_iteration_with_ray_runners(tmp_path, ray_session):
    # the env runs in a runner actor and signals this (the driver's) process while it waits for the samples; the
    # resumed run samples in-process (resuming on runner actors is test_checkpoint's: one actor start, not two)
    interrupt_and_resume(tmp_path / "run", signalling_config(at_step=2 * STEPS_PER_ITERATION + 5, runners=1),
                         resume_overrides=("env_runners.num_env_runners=0",))
    placement = json.loads((tmp_path / "run" / "cluster.json").read_text())  # node ids with their addresses
    assert placement["env_runner_addresses"] == [placement["node_addresses"][placement["env_runner_nodes"][0]]]
    assert placement["driver_address"].count(".") == 3


def test_a_second_signal_stops_at_once_keeping_the_earlier_checkpoint(tmp_path):
    """SIGINT twice in iteration 3 (its 5th and 10th steps): the run stops mid-iteration; the checkpoint is iteration 2's."""
    config = signalling_config(at_step=2 * STEPS_PER_ITERATION + 5, signum=signal.SIGINT).checkpointing(checkpoint_frequency=2)
    config.environment_cfg.env_config["again_at"] = 2 * STEPS_PER_ITERATION + 10
    run_dir, lines = tmp_path / "run", []
    run_dir.mkdir()
    with pytest.raises(KeyboardInterrupt) as stopped:
        train_run(config, run_dir, echo=lines.append)
    assert not isinstance(stopped.value, RunInterrupted)
    assert checkpoint_iteration(run_dir) == 2 and iterations_logged(run_dir) == [1, 2]
    assert lines[-1].startswith("interrupted mid-iteration")
    assert any(line.startswith("SIGINT: finishing the current iteration") and "Ctrl-C stops at once" in line for line in lines)


def test_checkpoint_every_s_saves_by_time_beside_the_iteration_count(tmp_path):
    """A period shorter than any iteration saves after each; 0 (off, with frequency 0) saves only at the end."""
    config = signalling_config(at_step=2 * STEPS_PER_ITERATION + 5).checkpointing(checkpoint_every_s=1e-9, checkpoint_at_end=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(RunInterrupted) as stopped:
        train_run(config, run_dir, echo=None)
    assert checkpoint_iteration(run_dir) == 2  # saved by time after iterations 1 and 2; not after the signal's 3rd
    assert "is from an earlier one (checkpointing.checkpoint_at_end is false)" in str(stopped.value)
    off = signalling_config(at_step=2 * STEPS_PER_ITERATION + 5).checkpointing(checkpoint_at_end=False)
    (tmp_path / "off").mkdir()
    with pytest.raises(RunInterrupted) as stopped:
        train_run(off, tmp_path / "off", echo=None)
    assert not (tmp_path / "off" / "checkpoint").exists()
    assert "checkpoint_at_end is false" in str(stopped.value)
    assert marl.PPOConfig().checkpointing_cfg.checkpoint_every_s == 300  # the default: a kill loses <= 5 minutes


def test_marl_train_sigterm_exits_0_with_one_line_and_resumes(tmp_path):
    """`marl train` SIGTERMed by the test after its second progress line: exit 0, one line naming the
    checkpoint, no traceback or stack dump; `marl train --resume` trains two more. The run's own stop is far off
    (1,000 iterations), so only the signal can end it, however late a loaded machine delivers it."""
    run_dir = tmp_path / "run"
    args = ["train", "--algo", "PPO", "--env", "tests.signal_envs", "--output", str(run_dir), "stop.iterations=1000",
            "env_runners.num_envs_per_env_runner=1", f"env_runners.rollout_fragment_length={STEPS_PER_ITERATION}",
            f"training.train_batch_size={2 * STEPS_PER_ITERATION}", "training.minibatch_size=40", "training.num_epochs=1"]
    proc = subprocess.Popen([sys.executable, "-m", "marl.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        seen = []
        while len([ln for ln in seen if ln.startswith("iter")]) < 2:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            seen.append(line)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    done = checkpoint_iteration(run_dir)
    assert done >= 2 and iterations_logged(run_dir) == list(range(1, done + 1))
    assert err.strip().splitlines()[-1] == (f"marl: SIGTERM: stopped after iteration {done}; checkpoint: "
                                            f"{(run_dir / 'checkpoint').resolve()} (continue with: marl train --resume {run_dir.resolve()})")
    assert "Traceback" not in err + out and "***" not in err + out
    p = subprocess.run([sys.executable, "-m", "marl.cli", "train", "--resume", str(run_dir), f"stop.iterations={done + 2}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 0, p.stderr
    assert iterations_logged(run_dir) == list(range(1, done + 3))
