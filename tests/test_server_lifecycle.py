"""The policy server says what it is doing: 'serving' only once bound, a refused start only the refusal, 503 with the
reason once training has ended, clients that wait for a late server, a cap on open episodes, observations that do not
fit float32 refused by name. Servers listen on 127.0.0.1 only; every loop here is bounded."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from marl.external import client as client_module
from marl.external import http_app
from marl.external import PolicyClient, PolicyServerError, PolicyServerUnavailable

from tests import serving
from tests.fake_clock import FakeClock
from tests.serving import ROOT, SCENARIO, free_port
from tests.bounds import HANG_S

SMALL = ["training.train_batch_size=150", "training.minibatch_size=75", "training.num_epochs=1"]
OBS = {f"agent_{i}": [0.0] * 18 for i in range(3)}


def serving_algo(port, overrides=(), **serve):
    """The serving scenario with one small update an iteration."""
    return serving.serving_algo(port, [*SMALL, *overrides], **serve)


def marl_serve(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MARL_SERVE_TOKEN")}
    return subprocess.Popen([sys.executable, "-m", "marl.cli", "serve", SCENARIO, *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def play_until_refused(address: str, most_episodes: int = 400) -> PolicyServerError:
    """Plays (zero observations, 25 steps each) until the server refuses a request; returns that refusal."""
    with PolicyClient(address, wait_s=30) as client:
        for _ in range(most_episodes):
            try:
                eid = client.start_episode()
                for _ in range(25):
                    client.get_action(eid, OBS)
                    client.log_returns(eid, {a: 0.0 for a in OBS})
                client.end_episode(eid, OBS, truncated=True)
            except PolicyServerError as err:
                return err
    raise AssertionError(f"the server took {most_episodes} episodes without ending")


@pytest.mark.slow
def test_serving_is_said_once_bound_and_clients_learn_why_training_ended(tmp_path):
    server = marl_serve("--port", "0", "--output", str(tmp_path / "run"), "--end-grace", "5", "stop.iterations=1")
    try:
        first = server.stdout.readline()  # blocks until the server prints: bound by then
        second = server.stdout.readline()
        assert first.startswith("run directory: "), (first, server.stderr.read() if server.poll() is not None else "")
        match = re.match(r"serving PPO on http://127\.0\.0\.1:(\d+) \(no token: local clients only\)", second)
        assert match, second
        port = int(match.group(1))
        with socket.create_connection(("127.0.0.1", port), timeout=1):  # accepts at once: the line came after bind
            pass
        refusal = play_until_refused(f"http://127.0.0.1:{port}")
        assert refusal.status == 503
        assert "training has ended: stop criterion met: iterations 1 >= 1" in refusal.message
        assert server.wait(timeout=HANG_S) == 0
        assert "stopped: iterations 1 >= 1" in server.stdout.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_refused_start_prints_only_the_refusal(tmp_path):
    server = marl_serve("--host", "0.0.0.0", "--output", str(tmp_path / "beyond"))
    out, err = server.communicate(timeout=HANG_S)
    assert server.returncode == 2 and out == "", out
    assert err.strip().splitlines() == ["marl: error: serving on 0.0.0.0 (beyond this machine) needs a token: give "
                                        "--token or set MARL_SERVE_TOKEN; clients send it as 'Authorization: Bearer <token>'"]
    assert not (tmp_path / "beyond").exists()
    server = marl_serve("--max-backlog", "0", "--output", str(tmp_path / "nobacklog"))
    out, err = server.communicate(timeout=HANG_S)
    assert server.returncode == 2 and out == "" and "--max-backlog >= 1 (got 0)" in err and "Traceback" not in err, err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = marl_serve("--port", str(taken.getsockname()[1]), "--output", str(tmp_path / "taken"))
        out, err = server.communicate(timeout=HANG_S)
    assert server.returncode == 2 and "serving" not in out and "run directory" not in out, out
    assert "marl: error: cannot serve on 127.0.0.1:" in err and "Traceback" not in err, err
    assert not (tmp_path / "taken").exists()


def test_a_client_waits_for_a_server_started_after_it(monkeypatch):
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    with monkeypatch.context() as patched:
        clock = FakeClock()
        patched.setattr(client_module, "time", clock)
        with pytest.raises(PolicyServerUnavailable, match=f"no policy server answered at {address} within 0.5 s"):
            PolicyClient(address, wait_s=0.5)
    assert clock.sleeps == pytest.approx([0.05, 0.1, 0.2, 0.15])  # backoff doubling, cut at the 0.5 s it was given
    with pytest.raises(PolicyServerUnavailable, match=r"cannot reach the policy server .*wait_s"):
        PolicyClient(address).start_episode()  # no waiting: one clear error, not httpx's

    clients = []
    thread = threading.Thread(target=lambda: clients.append(PolicyClient(address, wait_s=60)), daemon=True)
    thread.start()
    time.sleep(1.0)  # the client is retrying by now
    algo = serving_algo(port)
    try:
        thread.join(timeout=HANG_S)
        assert clients, "the client did not connect to the server started after it"
        with clients[0] as client:
            eid = client.start_episode()
            assert set(client.get_action(eid, OBS)) == set(OBS)
    finally:
        algo.stop()


def test_open_episodes_are_capped_and_odd_observations_refused_by_name():
    port = free_port()
    algo = serving_algo(port, max_episodes=3)
    try:
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=HANG_S)
        eids = [http.post("/episodes", json={}).json()["episode_id"] for _ in range(3)]
        over = http.post("/episodes", json={})
        assert over.status_code == 429 and "3 episodes are open, the most this server keeps (max_episodes=3)" in over.json()["error"]
        assert http.post(f"/episodes/{eids[0]}/action", json={"obs": OBS}).status_code == 200  # the open ones go on
        assert http.post(f"/episodes/{eids[0]}/end", json={"obs": OBS, "truncated": True}).status_code == 200
        assert http.post("/episodes", json={}).status_code == 200  # a place freed: served again
        big = http.post(f"/episodes/{eids[1]}/action", json={"obs": {**OBS, "agent_1": [1e308] + [0.0] * 17}})
        assert big.status_code == 400 and "observation of 'agent_1' has 1e+308 at index 0, beyond float32" in big.json()["error"]
        inf = http.post(f"/episodes/{eids[1]}/action", content=b'{"obs": {"agent_0": [0, Infinity' + b', 0' * 16 + b']}}',
                        headers={"content-type": "application/json"})
        assert inf.status_code == 400 and "observation of 'agent_0' has a non-finite value (inf) at index 1" in inf.json()["error"]
        assert http.get("/stats").json()["external/refused/429"] == 1
    finally:
        algo.stop()


def test_after_the_run_ends_requests_get_503_with_the_reason_for_the_grace_period(monkeypatch):
    """The grace period's sleep is a gate the test opens, so the requests below are made during it however slow
    the machine is; once it is over the server is gone."""
    grace_over = threading.Event()
    slept: list[float] = []

    class GraceClock:  # `time` as http_app reads it: its one sleep is the grace period
        @staticmethod
        def sleep(seconds):
            slept.append(seconds)
            assert grace_over.wait(timeout=HANG_S), "the test never ended the grace period"

    monkeypatch.setattr(http_app, "time", GraceClock)
    port = free_port()
    algo = serving_algo(port, end_grace_s=2.0)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=HANG_S)
    eid = http.post("/episodes", json={}).json()["episode_id"]
    stopping = threading.Thread(target=algo.stop, kwargs={"reason": "stop criterion met: iterations 3 >= 3"})
    stopping.start()
    deadline = time.monotonic() + HANG_S  # bounds the wait for stop() to mark the server ended (order, not seconds)
    answer = http.post(f"/episodes/{eid}/action", json={"obs": OBS})
    while answer.status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.05)
        answer = http.post(f"/episodes/{eid}/action", json={"obs": OBS})
    assert answer.status_code == 503, answer.text
    assert answer.json() == {"error": "training has ended: stop criterion met: iterations 3 >= 3; this server takes no "
                                      "more requests and exits shortly", "ended": "stop criterion met: iterations 3 >= 3"}
    assert http.get("/stats").json()["ended"] == "stop criterion met: iterations 3 >= 3"
    assert slept == [2.0]  # the grace period is end_grace_s
    grace_over.set()
    stopping.join(timeout=HANG_S)
    assert not stopping.is_alive()
    with pytest.raises(httpx.ConnectError):  # after the grace period: gone
        http.get("/stats")
