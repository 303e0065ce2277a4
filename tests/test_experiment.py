"""`marl experiment` and `marl report`: suites checked like scenarios, runs resumable, reports that match rliable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from marl.algorithms import ConfigError
from marl.experiment import load_suite
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
TINY = """
name: tiny
env_steps: 512
seeds: 2
tasks:
  cartpole: {env: CartPole-v1}
algorithms:
  PPO: {overrides: {training: {train_batch_size: 128, minibatch_size: 64, num_epochs: 1}}}
evaluation: {episodes: 2, interval: 2}
checkpoint_frequency: 1
overrides: {env_runners: {num_envs_per_env_runner: 2, rollout_fragment_length: 64}, loggers: {tensorboard: false}}
"""


def cli(*args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "marl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_S, env=env, **kw)


def test_ready_suites_load_and_build_every_run():
    smoke = load_suite(ROOT / "suites/smoke.yaml")
    assert len(smoke.runs) == 8 and {(r.task, r.algorithm) for r in smoke.runs} == {
        (t, a) for t in ("cartpole", "simple_spread") for a in ("PPO", "A2C")}
    mpe = load_suite(ROOT / "suites/mpe_cooperative.yaml")
    assert len(mpe.runs) == 45 and mpe.seeds == [0, 1, 2, 3, 4]
    assert {r.algorithm for r in mpe.runs} == {"PPO", "MAPPO", "QMIX"}
    assert {r.task for r in mpe.runs} == {"simple_spread", "simple_reference", "simple_speaker_listener"}
    config = next(r for r in mpe.runs if r.algorithm == "QMIX" and r.seed == 3).config()
    assert config.algo_name == "QMIX" and config.debugging_cfg.seed == 3
    assert config.stop_cfg.env_steps_total == mpe.env_steps and config.stop_cfg.episode_return_mean is None
    rllib = load_suite(ROOT / "suites/rllib_targets.yaml")  # RLlib's targets, each in half its budget
    rows = {(r.task, r.algorithm): (r.target, r.budget) for r in rllib.runs}
    assert len(rllib.runs) == 15 and rows[("cartpole_2", "PPO")] == (800.0, 150_000)
    assert rows[("pendulum_2", "PPO")] == (-600.0, 250_000)  # PPO's own Box defaults (its rllib-settings row is gone)
    assert rows[("cartpole_4", "APPO")] == (600.0, 100_000) and rows[("pendulum_2", "SAC")] == (-900.0, 250_000)
    sac = next(r for r in rllib.runs if r.algorithm == "SAC").config()
    assert sac.stop_cfg.episode_return_window == 5 and sac.environment_cfg.env == "copies.Pendulum-v1"
    batched = load_suite(ROOT / "suites/mpe_batched_2m.yaml")  # JaxMARL's MPE on the batched path, 2M steps
    assert len(batched.runs) == 30 and {r.algorithm for r in batched.runs} == {"IPPO", "MAPPO"}
    listener = next(r for r in batched.runs if r.task == "simple_speaker_listener" and r.algorithm == "MAPPO").config()
    assert set(listener.policy_specs()) == {"speaker", "listener"} and listener.training_cfg.train_batch_size == 16384
    assert listener.env_runners_cfg.num_envs_per_env_runner == 256 and listener.stop_cfg.env_steps_total == 2_000_000
    vmas = load_suite(ROOT / "suites/vmas_10m.yaml")  # VMAS at BenchMARL's 10M-frame budget, 600 worlds
    assert len(vmas.runs) == 20 and {(r.task, r.algorithm) for r in vmas.runs} == {
        (t, a) for t in ("navigation", "balance") for a in ("IPPO", "MAPPO")}
    ippo = next(r for r in vmas.runs if r.task == "balance" and r.algorithm == "IPPO").config()
    assert ippo.algo_name == "PPO" and ippo.stop_cfg.env_steps_total == 10_000_000
    assert ippo.env_runners_cfg.num_envs_per_env_runner == 600 and ippo.environment_cfg.env_config["n_agents"] == 3
    assert (ippo.training_cfg.train_batch_size, ippo.training_cfg.minibatch_size) == (180_000, 3_000)
    assert ippo.training_cfg.gae_lambda == 0.95  # the tasks' value, not PPO's Box `auto` (Pendulum's 0.1)


@pytest.mark.parametrize("text, message", [
    ("env_step: 5\n", r"unknown key 'env_step' \(did you mean 'env_steps'\?\)"),
    ("env_steps: 0\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPO]\n", r"'env_steps' must be an integer >= 1, got 0"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPX]\n", r"algorithm 'PPX'"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1, overides: {}}}\nalgorithms: [PPO]\n",
     r"task 'a': unknown key 'overides' \(did you mean 'overrides'\?\)"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1}}\nalgorithms: {PPO: {overrides: {training.lrr: 1}}}\n",
     r"unknown key 'training.lrr' \(did you mean 'lr'\?\)"),
    ("env_steps: 10\nseeds: [1, 1]\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPO]\n", r"'seeds' repeats a seed"),
    ("env_steps: 10\ntasks: {a: {}}\nalgorithms: [PPO]\n", r"task 'a': give 'task' \(a config group\), 'env'"),
    ("env_steps: 10\ntasks: {a: {task: vmas/navigaton}}\nalgorithms: [PPO]\n",
     r"task 'a': unknown task 'vmas/navigaton' \(did you mean 'vmas/navigation'\?\)"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1}}\nalgorithms: {X: {algorithm: ppp}}\n",
     r"algorithm 'X': unknown algorithm 'ppp' \(did you mean 'ppo'\?\)"),
    ("env_steps: 10\nexperiment: benchmarl\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPO]\n",
     r"unknown experiment 'benchmarl' \(did you mean 'benchmarl_vmas'\?\)"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPO]\nevaluation: {episodes: 0}\n",
     r"'evaluation.episodes' must be an integer >= 1"),
    ("env_steps: 10\ntasks: {a: {scenario: nope.yaml}}\nalgorithms: [PPO]\n", r"scenario file 'nope.yaml' does not exist"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPO]\ntargets: {a: {PPO: {episode_return: 5}}}\n",
     r"'targets.a.PPO': unknown key 'episode_return'"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPO]\ntargets: {b: {PPO: {episode_return_mean: 5}}}\n",
     r"'targets' names task 'b', which is not in 'tasks'"),
    ("env_steps: 10\ntasks: {a: {env: CartPole-v1}}\nalgorithms: [PPO]\ntargets: {a: {PPO: {episode_return_mean: 5, env_steps: 0}}}\n",
     r"'targets.a.PPO.env_steps' must be an integer >= 1, got 0"),
])
def test_a_bad_suite_is_one_line_naming_the_key(tmp_path, text, message):
    suite = tmp_path / "bad.yaml"
    suite.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_suite(suite)
    p = cli("experiment", str(suite), "--output", str(tmp_path / "runs"))
    assert p.returncode == 2 and p.stdout == ""
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("marl: error: ") and "Traceback" not in p.stderr


def test_local_suite_skips_finished_runs_and_extends_them_from_checkpoints(tmp_path):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    out = tmp_path / "runs"
    p = cli("experiment", str(suite), "--local", "--output", str(out))
    assert p.returncode == 0, p.stderr
    assert "[cartpole/PPO/seed_1] finished" in p.stdout and "all 2 runs finished" in p.stdout
    run_dir = out / "cartpole/PPO/seed_0"
    rows = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["env_steps_total"] for r in rows] == [128, 256, 384, 512]
    assert "evaluation/episode_return_mean" in rows[-1] and "evaluation/episode_return_mean" in rows[1]
    for row in (rows[1], rows[-1]):  # interval and final evaluations keep every episode (CartPole: return = length)
        assert len(row["evaluation/episode_returns"]) == 2
        assert row["evaluation/episode_returns"] == [float(n) for n in row["evaluation/episode_lengths"]]
        assert np.mean(row["evaluation/episode_returns"]) == pytest.approx(row["evaluation/episode_return_mean"])
    assert "episode_returns" not in (run_dir / "progress.csv").read_text()  # the CSV holds scalars only
    first = (run_dir / "result.jsonl").read_bytes()

    p = cli("experiment", str(suite), "--local", "--output", str(out))  # nothing to do
    assert p.returncode == 0 and "2 finished, 0 to run" in p.stdout and "skipped (done)" in p.stdout
    assert (run_dir / "result.jsonl").read_bytes() == first

    p = cli("experiment", str(suite), "env_steps=768", "--local", "--output", str(out))  # a larger budget: resumed
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["env_steps_total"] for r in rows] == [128, 256, 384, 512, 640, 768]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert json.loads((run_dir / "done.json").read_text())["resumed"] is True


def _done(out: Path) -> dict[str, bytes]:
    return {str(p.parent.relative_to(out)): (p.parent / "result.jsonl").read_bytes() for p in out.glob("*/*/seed_*/done.json")}


def _checkpointed_unfinished(out: Path) -> set[str]:
    """Runs with a checkpoint and no done.json: interrupted mid-run."""
    return {str(p.parent.parent.relative_to(out)) for p in out.glob("*/*/seed_*/checkpoint/manifest.json")} - set(_done(out))


def _png_ok(path: Path, min_size=(300, 200)):
    from test_cli_surface import assert_real_png

    assert_real_png(path, min_size=min_size)


MARL_EVAL_METRICS = {"return", "episode_length"}


def assert_marl_eval_layout(data: dict, tasks, algorithms, seeds, episodes: int | None = None):
    """marl-eval's raw-data layout, as its loader (`data_process_pipeline`, `create_matrices_for_rliable`) and its
    `DiagnoseData.check_data` read it: env -> task -> algorithm (lower case, no comma) -> run -> step_i
    {step_count: int, metric: [one number per episode]} + absolute_metrics {metric: [...]}; every run with the same
    steps and every step (absolute_metrics included) with the same metrics. `episodes`: each list's length."""
    steps_seen = set()
    assert len(data) >= 1
    found_tasks = {}
    for env_name, env_tasks in data.items():
        assert isinstance(env_name, str) and isinstance(env_tasks, dict)
        for task, algos in env_tasks.items():
            found_tasks[task] = set(algos)
            for algo, runs in algos.items():
                assert algo == algo.lower() and "," not in algo
                assert set(runs) == {f"seed_{s}" for s in seeds}
                for run in runs.values():
                    step_keys = [k for k in run if k.startswith("step_")]
                    assert set(run) == set(step_keys) | {"absolute_metrics"}
                    assert step_keys == [f"step_{i}" for i in range(len(step_keys))]
                    counts = []
                    for entry in [run[key] for key in step_keys] + [run["absolute_metrics"]]:
                        assert set(entry) - {"step_count"} == MARL_EVAL_METRICS
                        returns, lengths = entry["return"], entry["episode_length"]
                        assert isinstance(returns, list) and isinstance(lengths, list) and len(returns) == len(lengths) >= 1
                        assert all(isinstance(v, float) and np.isfinite(v) for v in returns + lengths)
                        assert all(v >= 1 for v in lengths)
                        if episodes is not None:
                            assert len(returns) == episodes
                        if entry is not run["absolute_metrics"]:
                            assert isinstance(entry["step_count"], int)
                            counts.append(entry["step_count"])
                    assert counts == sorted(counts) and len(set(counts)) == len(counts)
                    steps_seen.add(tuple(counts))
    assert len(steps_seen) == 1
    assert found_tasks == {t: {a.lower() for a in algorithms} for t in tasks}


def _early_checkpointed_unfinished(out: Path, max_rows: int = 2) -> set[str]:
    """Unfinished runs with a checkpoint and at most `max_rows` iterations: several iterations still to go."""
    return {name for name in _checkpointed_unfinished(out)
            if (out / name / "result.jsonl").is_file()
            and len((out / name / "result.jsonl").read_text().splitlines()) <= max_rows}


SLOW_CARTPOLE = """
import time
import gymnasium as gym
from marl import register_env


class SlowSteps(gym.Wrapper):
    \"\"\"CartPole at about 3 ms a step, so a run lasts seconds: a signal can land mid-run on any machine.\"\"\"

    def step(self, action):
        time.sleep(0.003)
        return self.env.step(action)


register_env("SlowCartPole", lambda cfg: SlowSteps(gym.make("CartPole-v1")))
"""


def _slowed_smoke_suite(tmp_path: Path) -> Path:
    """suites/smoke.yaml with its cartpole task stepping a slowed CartPole (registered by the suite's `imports`),
    one seed a cell: 4 runs, each a Tune trial in a process of its own (two seeds doubled the test's time and
    tested nothing more: the report's seeds are tested on runs made without training, `_fake_runs`)."""
    import yaml

    (tmp_path / "slow_cartpole.py").write_text(SLOW_CARTPOLE)
    suite = yaml.safe_load((ROOT / "suites" / "smoke.yaml").read_text())
    suite["tasks"]["cartpole"]["env"] = "SlowCartPole"
    suite["seeds"] = 1
    suite["imports"] = ["slow_cartpole"]
    path = tmp_path / "smoke_slowed.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def _interrupt_suite_mid_run(suite: Path, out: Path, min_done: int) -> tuple[int, str]:
    """`marl experiment` on `suite`, sent SIGINT (as Ctrl-C does: to the driver; Tune stops its trials) once
    `min_done` runs are finished and another has checkpointed early in its run; (exit code, output).

    The output goes to a file, not a pipe: a pipe nobody reads until the end fills up and blocks the driver (and so
    every trial waiting for it to take their results)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = out.parent / "experiment.log"

    def caught() -> bool:
        return len(_done(out)) >= min_done and bool(_early_checkpointed_unfinished(out))

    with open(log, "w") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "marl.cli", "experiment", str(suite), "--output", str(out),
                                 "--max-concurrent", "2"], cwd=ROOT, env=env, stdout=log_file,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + HANG_S
            while time.time() < deadline and proc.poll() is None and not caught():
                time.sleep(0.05)
            assert caught(), f"no run checkpointed early (exit code {proc.poll()}):\n{log.read_text()[-3000:]}"
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=HANG_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return proc.returncode, log.read_text()


@pytest.mark.slow
def test_smoke_suite_on_ray_interrupted_with_sigint_then_resumed_and_reported(tmp_path):
    out = tmp_path / "runs"
    suite = _slowed_smoke_suite(tmp_path)
    # Tune stops its trials a moment after the signal; on a loaded machine a run can still finish in that moment,
    # leaving no interrupted run to resume. Interrupt again then (finished runs are skipped each time).
    for attempt in range(3):
        returncode, output = _interrupt_suite_mid_run(suite, out, min_done=2 if attempt == 0 else 0)
        assert returncode == 130, output[-3000:]
        assert "re-run the same command to resume" in output
        if _checkpointed_unfinished(out):
            break
    before = _done(out)
    assert 2 <= len(before) < 4, sorted(before)
    interrupted_with_checkpoint = _checkpointed_unfinished(out)
    assert interrupted_with_checkpoint  # SIGINT came in the middle of a run

    p = cli("experiment", str(suite), "--output", str(out), "--max-concurrent", "2")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"{len(before)} finished, {4 - len(before)} to run" in p.stdout
    after = _done(out)
    assert len(after) == 4
    for name, rows in before.items():  # finished runs are not run again
        assert after[name] == rows, name
        assert f"[{name}] skipped (done)" in p.stdout
        assert f"[{name}] iter" not in p.stdout
    for name in interrupted_with_checkpoint:  # interrupted runs continue from their checkpoint
        assert json.loads((out / name / "done.json").read_text())["resumed"] is True, name
    for name in after:
        rows = [json.loads(line) for line in (out / name / "result.jsonl").read_text().splitlines()]
        assert [r["iteration"] for r in rows] == list(range(1, len(rows) + 1)), name  # each iteration once
        assert rows[-1]["env_steps_total"] >= 1536 and rows[-1]["evaluation/episodes"] == 2

    p = cli("report", str(out), "--reps", "300")
    assert p.returncode == 0, p.stderr
    report = out / "report"
    table = (report / "results.md").read_text()
    for task in ("cartpole", "simple_spread"):
        for algo in ("PPO", "A2C"):
            assert f"| {task} | {algo} | 1 |" in table
    assert "| PPO | 1 x 2 |" in table and "| A2C | 1 x 2 |" in table  # runs x tasks
    assert_marl_eval_layout(json.loads((report / "marl_eval.json").read_text()), ["cartpole", "simple_spread"],
                            ["PPO", "A2C"], [0], episodes=2)  # the suite's evaluation.episodes, each one listed
    _png_ok(report / "sample_efficiency.png", (1200, 300))
    _png_ok(report / "performance_profile.png", (500, 300))
    _png_ok(report / "aggregates.png", (400, 100))


def _episode_values(mean: float, spread: float = 3.0) -> list[float]:
    """Three episode returns whose mean is `mean` (as an evaluation of 3 episodes records them)."""
    return [mean - spread, mean - 0.5 * spread, mean + 1.5 * spread]


def _fake_runs(root: Path, finals: dict, budget: int = 1000) -> None:
    """A runs directory as `marl experiment` leaves it, with known evaluation returns (no training)."""
    (root / "suite.yaml").write_text(f"name: fake\nenv_steps: {budget}\n")
    for (task, algo, seed), (curve, final) in finals.items():
        d = root / task / algo / f"seed_{seed}"
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"task": task, "algorithm": algo, "seed": seed, "family": "mpe2"}))
        (d / "done.json").write_text(json.dumps({"env_steps_total": budget}))
        steps = np.linspace(budget / len(curve), budget, len(curve)).astype(int)
        rows = []
        for i, (s, v) in enumerate(zip(steps, [*curve[:-1], final])):  # the last evaluation is the run's score
            returns = _episode_values(float(v))
            rows.append({"iteration": i + 1, "env_steps_total": int(s), "episode_return_mean": -1.0,
                         "evaluation/episode_return_mean": float(np.mean(returns)),
                         "evaluation/episode_returns": returns, "evaluation/episode_lengths": [25, 25, 10 + i]})
        (d / "result.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_report_iqm_and_cis_match_rliable_called_directly(tmp_path):
    from rliable import library as rly
    from rliable import metrics

    def rliable_direct(scores, fn):  # rliable resamples with NumPy's global generator: seed it as the report does
        np.random.seed(0)
        return rly.get_interval_estimates(scores, fn, reps=500, random_state=np.random.RandomState(0))

    from marl.experiment.report import write_report

    rng = np.random.default_rng(3)
    tasks, algos, seeds = ["spread", "reference"], ["PPO", "QMIX"], range(5)
    scale = {"spread": (-120.0, 40.0), "reference": (-60.0, 15.0)}
    finals = {}
    for t in tasks:
        for a in algos:
            for s in seeds:
                lo, width = scale[t]
                final = lo + width * rng.random() + (10.0 if a == "PPO" else 0.0)
                finals[(t, a, s)] = (list(lo + width * rng.random(4)), final)
    _fake_runs(tmp_path, finals)
    write_report(tmp_path, reps=500, points=4)
    numbers = json.loads((tmp_path / "report/aggregates.json").read_text())

    for t in tasks:  # per task: raw returns, (runs x 1) matrices
        scores = {a: np.array([[finals[(t, a, s)][1]] for s in seeds]) for a in algos}
        for name, fn in (("iqm", metrics.aggregate_iqm), ("mean", metrics.aggregate_mean)):
            point, ci = rliable_direct(scores, lambda x, fn=fn: np.array([fn(x)]))
            for a in algos:
                assert numbers["tasks"][t][a][name] == pytest.approx([point[a][0], ci[a][0][0], ci[a][1][0]], rel=1e-9)
    # overall: each task min-max normalised over all its runs' curves and finals
    bounds = {}
    for t in tasks:
        values = [v for (tt, _, _), (curve, final) in finals.items() if tt == t for v in [*curve[:-1], final]]
        bounds[t] = (min(values), max(values))
    columns = sorted(tasks)  # the report's task order (its runs directory's)
    scores = {a: np.array([[(finals[(t, a, s)][1] - bounds[t][0]) / (bounds[t][1] - bounds[t][0]) for t in columns]
                           for s in seeds]) for a in algos}
    point, ci = rliable_direct(scores, lambda x: np.array([metrics.aggregate_iqm(x)]))
    for a in algos:
        assert numbers["overall"][a]["iqm"] == pytest.approx([point[a][0], ci[a][0][0], ci[a][1][0]], rel=1e-9)
        assert ci[a][0][0] < point[a][0] < ci[a][1][0]  # a real interval, not a degenerate one
    table = (tmp_path / "report/results.md").read_text()
    iqm = numbers["tasks"]["spread"]["PPO"]["iqm"]
    assert f"| spread | PPO | 5 | {iqm[0]:.2f} [{iqm[1]:.2f}, {iqm[2]:.2f}] |" in table
    assert_marl_eval_layout(json.loads((tmp_path / "report/marl_eval.json").read_text()), tasks, algos, list(seeds))
    data = json.loads((tmp_path / "report/marl_eval.json").read_text())
    run = data["mpe2"]["spread"]["ppo"]["seed_2"]
    curve, final = finals[("spread", "PPO", 2)]
    # every episode of the final evaluation, and of the evaluation at each step (here one per grid point)
    assert run["absolute_metrics"] == {"return": pytest.approx(_episode_values(final)), "episode_length": [25, 25, 13]}
    assert [run[f"step_{i}"]["step_count"] for i in range(4)] == [250, 500, 750, 1000]
    for i, value in enumerate([*curve[:-1], final]):
        assert run[f"step_{i}"] == {"step_count": 250 * (i + 1), "return": pytest.approx(_episode_values(value)),
                                    "episode_length": [25, 25, 10 + i]}
    assert_marl_eval_layout(data, tasks, algos, list(seeds), episodes=3)
    _png_ok(tmp_path / "report/sample_efficiency.png", (1200, 300))


def test_report_of_a_directory_without_runs_is_one_line(tmp_path):
    p = cli("report", str(tmp_path))
    assert p.returncode == 2 and "holds no finished run" in p.stderr and "Traceback" not in p.stderr


def test_local_suite_interrupted_with_sigint_resumes_from_its_checkpoint(tmp_path):
    suite = tmp_path / "tiny.yaml"
    # 250 iterations of 128 env steps, each checkpointed: seconds even on a fast machine, and the interrupt lands two
    # iterations in, so it always lands mid-run (500 iterations made the resumed run ~20 s of the suite)
    suite.write_text(TINY.replace("env_steps: 512", "env_steps: 32000").replace("seeds: 2", "seeds: 1"))
    out = tmp_path / "runs"
    results = out / "cartpole/PPO/seed_0/result.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "marl.cli", "experiment", str(suite), "--local", "--output", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + HANG_S
        while time.time() < deadline and not _checkpointed_unfinished(out):
            time.sleep(0.1)
        rows_now = lambda: len(results.read_text().splitlines()) if results.exists() else 0  # noqa: E731
        seen = rows_now()
        while time.time() < deadline and rows_now() <= seen:
            time.sleep(0.05)  # an iteration past the first checkpoint
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, output[-2000:]
    assert "[cartpole/PPO/seed_0] interrupted" in output and "re-run the same command to resume" in output
    run_dir = out / "cartpole/PPO/seed_0"
    assert not (run_dir / "done.json").exists()
    kept = len((run_dir / "result.jsonl").read_text().splitlines())
    p = cli("experiment", str(suite), "--local", "--output", str(out))
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == list(range(1, 251)) and rows[-1]["env_steps_total"] == 32000
    assert json.loads((run_dir / "done.json").read_text())["resumed"] is True and kept >= 1


def test_report_curves_use_training_returns_when_only_the_end_was_evaluated(tmp_path):
    from marl.experiment.report_runs import read_runs

    d = tmp_path / "t" / "PPO" / "seed_0"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"task": "t", "algorithm": "PPO", "seed": 0, "family": "gymnasium"}))
    (d / "done.json").write_text(json.dumps({"env_steps_total": 300}))
    rows = [{"iteration": i, "env_steps_total": 100 * i, "episode_return_mean": float(10 * i),
             "episode_len_mean": 20.0 + i} for i in (1, 2, 3)]
    rows[-1].update({"evaluation/episode_return_mean": 99.0, "evaluation/episode_returns": [98.0, 100.0],
                     "evaluation/episode_lengths": [7, 9]})
    (d / "result.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,), unfinished = read_runs(tmp_path)
    assert list(run.returns) == [10.0, 20.0, 30.0] and run.final == 99.0 and unfinished == []
    # marl-eval JSON: the steps hold the training return (its mean, one value: no per-episode list exists),
    # absolute_metrics the final evaluation's episodes
    assert run.episodes_near(140) == ([10.0], [21.0]) and run.episodes_near(260) == ([30.0], [23.0])
    assert run.final_episodes == ([98.0, 100.0], [7.0, 9.0])


def test_marl_eval_steps_take_the_nearest_evaluation_and_old_rows_their_mean(tmp_path):
    from marl.experiment.report import Report, marl_eval_json
    from marl.experiment.report_runs import read_runs

    d = tmp_path / "t" / "PPO" / "seed_0"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"task": "t", "algorithm": "PPO", "seed": 0, "family": "gymnasium"}))
    (d / "done.json").write_text(json.dumps({"env_steps_total": 1000}))
    rows = [{"iteration": i, "env_steps_total": 130 * i, "episode_return_mean": 0.0} for i in range(1, 9)]
    rows[1].update({"evaluation/episode_return_mean": 5.0, "evaluation/episode_len_mean": 12.0})  # an old row: no lists
    for i, episodes in ((3, [1.0, 2.0]), (5, [3.0, 5.0]), (7, [6.0, 8.0])):
        rows[i].update({"evaluation/episode_return_mean": float(np.mean(episodes)),
                        "evaluation/episode_returns": episodes, "evaluation/episode_lengths": [4, 6]})
    (d / "result.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs, _ = read_runs(tmp_path)
    data = marl_eval_json(Report(runs, points=4, budget=1000))["gymnasium"]["t"]["ppo"]["seed_0"]
    # evaluations at 260 (old: its mean), 520, 780, 1040 env steps; the grid is 250, 500, 750, 1000
    assert [data[f"step_{i}"]["return"] for i in range(4)] == [[5.0], [1.0, 2.0], [3.0, 5.0], [6.0, 8.0]]
    assert [data[f"step_{i}"]["episode_length"] for i in range(4)] == [[12.0], [4.0, 6.0], [4.0, 6.0], [4.0, 6.0]]
    assert data["absolute_metrics"] == {"return": [6.0, 8.0], "episode_length": [4.0, 6.0]}
    assert_marl_eval_layout({"gymnasium": {"t": {"ppo": {"seed_0": data}}}}, ["t"], ["PPO"], [0])


TARGETS = """
name: targets
env_steps: 100000
seeds: 1
tasks:
  cartpole: {env: CartPole-v1}
  pendulum: {env: Pendulum-v1}
algorithms:
  PPO: {overrides: {training: {train_batch_size: 128, minibatch_size: 64, num_epochs: 1}}}
  A2C: {overrides: {training: {train_batch_size: 128, min_env_steps_per_iteration: 128}}}
targets:
  cartpole:
    PPO: {episode_return_mean: 5, env_steps: 512, reference_env_steps: 1024, reference: "a return any policy reaches"}
    A2C: {episode_return_mean: 100000, episode_return_window: 3, env_steps: 256}
evaluation: {episodes: 2}
checkpoint_frequency: 1
overrides: {env_runners: {num_envs_per_env_runner: 2, rollout_fragment_length: 64}, loggers: {tensorboard: false}}
"""


def test_targets_rows_run_to_their_return_or_their_own_budget_and_the_report_tables_them(tmp_path):
    suite = tmp_path / "targets.yaml"
    suite.write_text(TARGETS)
    loaded = load_suite(suite)  # only the listed pairs: no pendulum run, no full grid
    assert [(r.task, r.algorithm, r.budget, r.target) for r in loaded.runs] == [
        ("cartpole", "PPO", 512, 5.0), ("cartpole", "A2C", 256, 100000.0)]
    config = loaded.runs[0].config()
    assert config.stop_cfg.env_steps_total == 512 and config.stop_cfg.episode_return_mean == 5.0
    assert config.stop_cfg.episode_return_window == 0 and loaded.runs[1].config().stop_cfg.episode_return_window == 3
    out = tmp_path / "runs"
    p = cli("experiment", str(suite), "--local", "--output", str(out))
    assert p.returncode == 0, p.stderr
    assert "2 target rows x 1 seeds" in p.stdout and "all 2 runs finished" in p.stdout
    reached = json.loads((out / "cartpole/PPO/seed_0/done.json").read_text())
    assert reached["target_reached"] is True and reached["env_steps_total"] == 128  # CartPole pays >= 8 per episode
    missed = json.loads((out / "cartpole/A2C/seed_0/done.json").read_text())
    assert missed["target_reached"] is False and missed["env_steps_total"] == 256  # its own budget, not the suite's
    p = cli("experiment", str(suite), "--local", "--output", str(out))  # a run that reached its target is finished
    assert p.returncode == 0 and "2 finished, 0 to run" in p.stdout
    p = cli("report", str(out))
    assert p.returncode == 0, p.stderr
    text = (out / "report/results.md").read_text()
    assert "| cartpole | PPO | 5 | iteration's | 1,024 | 512 | seed 0: 128 | yes |" in text
    assert "| cartpole | A2C | 100000 | last 3 | - | 256 | seed 0: missed (best " in text and "| no |" in text
    assert "cartpole/PPO: a return any policy reaches" in text
    rows = json.loads((out / "report/aggregates.json").read_text())["targets"]
    assert rows[0]["env_steps_to_target"] == {"0": 128} and rows[1]["env_steps_to_target"] == {"0": None}


def test_a_run_another_process_is_training_is_skipped_untouched(tmp_path):
    """Two `marl experiment` processes on one runs directory: a run the other one holds (its lock, an flock beside
    the run directory) is neither wiped (a run with no checkpoint yet is started afresh) nor resumed under it; this
    process trains the rest and says which it skipped and who holds it."""
    import fcntl

    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    out = tmp_path / "runs"
    busy = out / "cartpole/PPO/seed_0"
    busy.mkdir(parents=True)
    (busy / "run.json").write_text("being written by the other process")
    with open(out / "cartpole/PPO/seed_0.lock", "w") as lock:  # what the other process holds while it trains
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("4242")
        lock.flush()
        p = cli("experiment", str(suite), "--local", "--output", str(out))
    assert p.returncode == 0, p.stderr
    assert "[cartpole/PPO/seed_0] skipped" in p.stdout and "pid 4242" in p.stdout, p.stdout
    assert "[cartpole/PPO/seed_1] finished" in p.stdout and "1 of 2 runs finished" in p.stdout
    assert "1 run(s) left to the process training them: cartpole/PPO/seed_0" in p.stdout
    assert (busy / "run.json").read_text() == "being written by the other process"
    assert sorted(x.name for x in busy.iterdir()) == ["run.json"]
    p = cli("experiment", str(suite), "--local", "--output", str(out))  # the lock released: it is trained now
    assert p.returncode == 0 and "[cartpole/PPO/seed_0] finished" in p.stdout, p.stdout
