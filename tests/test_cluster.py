"""A two-node Ray cluster on this machine: `ray start` a head and a worker node, `ray job submit` a training run
and a suite (`marl experiment` + `marl report`).

Both nodes use free ports and their own temp dir, so other Ray instances on the
machine are untouched; they are shut down by signalling the two `ray start
--block` processes (which stop their own Ray processes), never with `ray stop`,
which would stop every Ray instance on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _wait_for(check, timeout: float, what: str, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: `ray start` exited with {p.returncode}")
        try:
            value = check()
            if value:
                return value
        except Exception:
            pass
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


def _alive_nodes(dashboard: str) -> int:
    with urllib.request.urlopen(f"{dashboard}/nodes?view=summary", timeout=5) as r:
        data = json.load(r)["data"]["summary"]
    return sum(1 for n in data if n["raylet"]["state"] == "ALIVE")


def _our_processes(markers: list[str]) -> list[int]:
    """PIDs of processes whose command line names one of our temp dirs (Ray processes of this test only)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if any(m in cmdline for m in markers):
                pids.append(int(entry.name))
    return pids


@contextlib.contextmanager
def two_node_cluster(tmp_path: Path, num_cpus: int):
    """A head and a worker node of `num_cpus` CPUs each; yields (env for Ray's CLI, dashboard URL, GCS address).

    Torn down in a finally by signalling the two `ray start --block` processes, then killing
    whatever of this cluster outlived them (found by its temp dirs), never with `ray stop`.
    """
    # One temp dir per node (short: Ray's socket paths must fit 107 chars). Two nodes sharing one would
    # share the folder a job's working dir is unpacked into, and one node's unpacking pulls it from under
    # the other's processes; nodes on separate machines never share it.
    temp_dirs = [tempfile.mkdtemp(prefix="marl-ray-", dir="/tmp") for _ in range(2)]
    gcs, dash, client, *agent_ports = _free_ports(11)
    # RAY_AUTH_MODE=disabled: a throwaway test cluster, dashboard on 127.0.0.1 only; the token
    # auth Ray enables by default would need every request here to carry the user's token.
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", RAY_USAGE_STATS_ENABLED="0",
               RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    dashboard = f"http://127.0.0.1:{dash}"
    common = ["--block", f"--num-cpus={num_cpus}", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]

    def node_ports(a, b, c, d):
        return [f"--dashboard-agent-listen-port={a}", f"--dashboard-agent-grpc-port={b}",
                f"--runtime-env-agent-port={c}", f"--metrics-export-port={d}"]

    logs = [open(tmp_path / "head.log", "w"), open(tmp_path / "worker.log", "w")]
    nodes: list[subprocess.Popen] = []
    try:
        nodes.append(subprocess.Popen(
            [str(BIN / "ray"), "start", "--head", f"--port={gcs}", f"--temp-dir={temp_dirs[0]}", "--include-dashboard=true",
             "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--ray-client-server-port={client}",
             *node_ports(*agent_ports[:4]), *common],
            env=env, stdout=logs[0], stderr=subprocess.STDOUT, start_new_session=True,
        ))
        _wait_for(lambda: _alive_nodes(dashboard) == 1, 120, "the head node", nodes)
        nodes.append(subprocess.Popen(
            [str(BIN / "ray"), "start", f"--address=127.0.0.1:{gcs}", f"--temp-dir={temp_dirs[1]}", *node_ports(*agent_ports[4:8]), *common],
            env=env, stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True,
        ))
        _wait_for(lambda: _alive_nodes(dashboard) == 2, 120, "the second node", nodes)
        yield env, dashboard, f"127.0.0.1:{gcs}"
    finally:
        for p in reversed(nodes):  # worker first, then head: `ray start --block` stops its own processes on SIGTERM
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=HANG_S)
                except subprocess.TimeoutExpired:
                    pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the node's session (start_new_session): only processes it started
            except (ProcessLookupError, PermissionError):
                pass
        for f in logs:
            f.close()
        deadline = time.monotonic() + HANG_S
        while _our_processes(temp_dirs) and time.monotonic() < deadline:
            time.sleep(1)
        for pid in _our_processes(temp_dirs):  # anything of ours that outlived its node
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for d in temp_dirs:
            shutil.rmtree(d, ignore_errors=True)
        assert not _our_processes(temp_dirs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster of two one-CPU nodes for this file's jobs (a node's start takes a while on a loaded machine)."""
    with two_node_cluster(tmp_path_factory.mktemp("cluster"), num_cpus=1) as started:
        yield started


@pytest.mark.slow
def test_ray_job_submit_spreads_env_runners_over_two_nodes(cluster, tmp_path):
    env, dashboard, _ = cluster  # two one-CPU nodes: room for one one-CPU env runner on each
    run_dir = tmp_path / "run"
    job = subprocess.run(
        [str(BIN / "ray"), "job", "submit", f"--address={dashboard}", "--working-dir", str(ROOT), "--",
         "marl", "train", "scenarios/cartpole_ppo.yaml", "env_runners.num_env_runners=2",
         "env_runners.num_cpus_per_env_runner=1", "env_runners.num_envs_per_env_runner=2",
         "env_runners.rollout_fragment_length=64", "training.train_batch_size=256", "training.num_epochs=2",
         "stop.iterations=3", "--output", str(run_dir)],
        env=env, capture_output=True, text=True, timeout=HANG_S,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert "iter    3" in job.stdout and "env runners: 2 on 2 node(s) of 2" in job.stdout, job.stdout[-3000:]

    results = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in results] == [1, 2, 3]
    assert results[-1]["env_steps_total"] == 3 * 2 * 2 * 64  # 3 rounds of 2 runners x 2 envs x 64 steps
    assert (run_dir / "checkpoint" / "manifest.json").is_file()
    placement = json.loads((run_dir / "cluster.json").read_text())
    assert len(placement["cluster_nodes"]) == 2
    assert sorted(placement["env_runner_nodes"]) == sorted(placement["cluster_nodes"]), placement  # one runner per node


@pytest.mark.slow
def test_ray_job_submit_runs_a_suite_over_two_nodes_and_reports_it(cluster, tmp_path):
    """`ray job submit ... -- marl experiment SUITE && marl report`: the suite's Tune trials, one CPU each, on a
    cluster of two one-CPU nodes, so both nodes run trials; RUNS_DIR is a path every node sees (here: one machine)."""
    from ray.util.state import list_actors

    runs = tmp_path / "runs"
    env, dashboard, _ = cluster
    job = subprocess.run(
        [str(BIN / "ray"), "job", "submit", f"--address={dashboard}", "--working-dir", str(ROOT), "--",
         "sh", "-c", f"marl experiment suites/smoke.yaml seeds=1 env_steps=512 --output {runs} && marl report {runs} --reps 200"],
        env=env, capture_output=True, text=True, timeout=HANG_S,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert "all 4 runs finished" in job.stdout, job.stdout[-3000:]
    trials = list_actors(address=dashboard, filters=[("class_name", "=", "ImplicitFunc")], detail=True,
                         raise_on_missing_output=False)
    # trials ran on both nodes (Tune reuses a trial's process for a later run: one to four processes for 4 runs)
    assert 2 <= len(trials) <= 4 and len({t.node_id for t in trials}) == 2, trials
    for task in ("cartpole", "simple_spread"):
        for algo in ("PPO", "A2C"):
            run_dir = runs / task / algo / "seed_0"
            assert json.loads((run_dir / "done.json").read_text())["env_steps_total"] >= 512
            rows = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]
            assert len(rows[-1]["evaluation/episode_returns"]) == 2  # the final evaluation: the suite's 2 episodes
    table = (runs / "report" / "results.md").read_text()
    assert "| cartpole | PPO | 1 |" in table and "| simple_spread | A2C | 1 |" in table
    data = json.loads((runs / "report" / "marl_eval.json").read_text())
    assert set(data["gymnasium"]["cartpole"]) == {"ppo", "a2c"} and (runs / "report" / "sample_efficiency.png").is_file()


def _ray_job(env, dashboard: str, command: str, *args, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "ray"), "job", command, f"--address={dashboard}", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_ray_job_stop_checkpoints_the_run_and_a_new_job_resumes_it(cluster, tmp_path):
    """`ray job stop` (SIGTERM to the driver) after the job logged its 2nd iteration: the iteration in flight
    finishes, the checkpoint is written, the job ends with one line naming it; a resubmitted `--resume` job
    trains the rest, each iteration once. RAY_JOB_STOP_WAIT_TIME_S gives the driver time before Ray kills it."""
    env, dashboard, _ = cluster
    run_dir = tmp_path / "run"
    job_id = f"marl_stop_{os.getpid()}_{time.monotonic_ns()}"
    submitted = _ray_job(
        env, dashboard, "submit", "--no-wait", f"--submission-id={job_id}", "--working-dir", str(ROOT),
        "--runtime-env-json", json.dumps({"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "300"}}), "--",
        "marl", "train", "scenarios/cartpole_ppo.yaml", "env_runners.num_env_runners=1",
        "env_runners.num_envs_per_env_runner=2", "env_runners.rollout_fragment_length=64",
        "training.train_batch_size=128", "training.num_epochs=1",
        # it must not end by itself before the stop arrives (CI once saw it reach return 450 at iteration 336, ~12 s
        # after its 2nd, before `ray job stop` did on a loaded machine): only the SIGTERM ends it
        "stop.episode_return_mean=null", "stop.env_steps_total=null", "stop.iterations=1000000", "--output", str(run_dir))
    assert submitted.returncode == 0, submitted.stdout[-2000:] + submitted.stderr[-2000:]
    def ended() -> bool:  # `ray job status` says "Job '...' was stopped" / "... succeeded" / "... failed"
        status = _ray_job(env, dashboard, "status", job_id)
        return any(word in (status.stdout + status.stderr).lower() for word in ("stopped", "succeeded", "failed"))

    def second_iteration_or_ended():
        logs = _ray_job(env, dashboard, "logs", job_id).stdout
        return ("iter    2" in logs or ended()) and logs

    logs = _wait_for(second_iteration_or_ended, 600, "the job's 2nd iteration")
    assert "iter    2" in logs, logs[-3000:]
    _ray_job(env, dashboard, "stop", job_id, timeout=HANG_S)
    _wait_for(ended, 300, "the job to stop")
    logs = _ray_job(env, dashboard, "logs", job_id).stdout
    done = json.loads((run_dir / "checkpoint" / "manifest.json").read_text())["iteration"]
    rows = [json.loads(line)["iteration"] for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert done >= 2 and rows == list(range(1, done + 1)), (done, rows)  # lost nothing: the last row is checkpointed
    assert f"marl: SIGTERM: stopped after iteration {done}; checkpoint: {run_dir}/checkpoint" in logs, logs[-2000:]
    assert "Traceback" not in logs and "*** SIGTERM" not in logs, logs[-3000:]
    placement = json.loads((run_dir / "cluster.json").read_text())
    addresses = placement["node_addresses"]  # node id -> IP, as Ray reports it (the machine's, here)
    assert placement["driver_address"] == addresses[placement["driver_node"]] and len(addresses) == 2
    assert placement["env_runner_addresses"] == [addresses[n] for n in placement["env_runner_nodes"]]
    assert all(a.count(".") == 3 for a in addresses.values()), addresses
    resumed = _ray_job(env, dashboard, "submit", "--working-dir", str(ROOT), "--",
                       "marl", "train", "--resume", str(run_dir), f"stop.iterations={done + 2}", timeout=HANG_S)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    rows = [json.loads(line)["iteration"] for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert rows == list(range(1, done + 3))
