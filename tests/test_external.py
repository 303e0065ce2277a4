"""marl serve: external clients drive training over HTTP; bad requests are refused with their error; a client that
dies mid-episode is dropped; PPO on simple_spread learns from an external client process (slow)."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

import marl
from marl.errors import ConfigError
from marl.external import PolicyClient, PolicyServerError
from marl.cli.serve import serving_config
from marl.external import server as server_module
from tests.fake_clock import FakeClock
from tests.serving import free_port, serving_algo
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
RANDOM_SIMPLE_SPREAD = -79.0  # a uniform random policy's episode return, summed over the 3 agents (measured)


def player(address, token=None, seed=0, **client):
    """A client thread playing until its `stop` event is set."""
    from external_client import play

    stop = threading.Event()
    thread = threading.Thread(target=play, args=(address, 10**6, token, seed, 60.0, stop), kwargs=client, daemon=True)
    thread.start()
    return thread, stop


def test_bad_requests_are_refused_with_their_error_while_training_goes_on(monkeypatch):
    monkeypatch.setenv("MARL_SERVE_TOKEN", "s3cret")
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    algo = serving_algo(port, ["training.train_batch_size=375"], max_body_kb=4)
    try:
        ops = [d["op"] for _, d in algo.workflow.graph.nodes(data=True)]
        assert "serve" in ops and "sample" not in ops
        thread, stop = player(address, token="s3cret")
        r1 = algo.train()
        http = httpx.Client(base_url=address)
        good = {"Authorization": "Bearer s3cret"}
        obs = {f"agent_{i}": [0.0] * 18 for i in range(3)}

        def refused(status, fragment, method="post", path="/episodes", **kw):
            response = getattr(http, method)(path, **kw)
            assert response.status_code == status, response.text
            assert fragment in response.json()["error"], response.json()

        refused(401, "missing or wrong token", json={})
        refused(401, "missing or wrong token", json={}, headers={"Authorization": "Bearer guess"})
        refused(401, "missing or wrong token", method="get", path="/stats")
        eid = PolicyClient(address, token="s3cret").start_episode()
        refused(404, "unknown episode id 'nope'", path="/episodes/nope/action", json={"obs": obs}, headers=good)
        refused(400, "not valid JSON", path=f"/episodes/{eid}/action", content=b"{obs:", headers={**good, "Content-Type": "application/json"})
        refused(400, "unknown agent id(s) ['agent_7']", path=f"/episodes/{eid}/action", json={"obs": {"agent_7": [0.0] * 18}}, headers=good)
        refused(400, "observation of 'agent_0' must be 18 finite numbers, got 3", path=f"/episodes/{eid}/action", json={"obs": {"agent_0": [1, 2, 3]}}, headers=good)
        refused(400, "not a list of numbers", path=f"/episodes/{eid}/action", json={"obs": {"agent_0": ["a"] * 18}}, headers=good)
        refused(400, "has not acted", path=f"/episodes/{eid}/rewards", json={"rewards": {"agent_0": 1.0}}, headers=good)
        refused(413, "over the limit of 4096 bytes", path=f"/episodes/{eid}/action", json={"obs": {"agent_0": [0.5] * 5000}}, headers=good)
        with pytest.raises(PolicyServerError, match="unknown episode id"):
            PolicyClient(address, token="s3cret").end_episode("gone", {})
        r2 = algo.train()
        stop.set()
        thread.join(timeout=HANG_S)
        assert r2["env_steps_total"] > r1["env_steps_total"] >= 100
        assert r2["counters/external/refused/401"] == 3
        assert r2["counters/external/refused/404"] == 2
        assert r2["counters/external/refused/400"] == 5
        assert r2["counters/external/refused/413"] == 1
        assert math.isfinite(r2["episode_return_mean"])
        assert r2["losses/shared/num_sgd_steps"] > 0
    finally:
        algo.stop()


def test_a_client_acting_locally_drives_training_with_pulled_weights():
    """inference: local -- the client rebuilds the modules from GET /weights, acts itself, sends its steps with their
    log-probs; the server trains on them and the client's weights version follows the learner's."""
    import torch

    port = free_port()
    address = f"http://127.0.0.1:{port}"
    algo = serving_algo(port, ["training.train_batch_size=375"])
    server = next(d["operator"] for _, d in algo.workflow.graph.nodes(data=True) if d["op"] == "serve").server
    try:
        client = PolicyClient(address, inference="local", update_interval_s=0.0)
        assert client.update_weights() and client.weights_version == server.weights_version
        obs = {f"agent_{i}": np.random.default_rng(i).normal(size=18) for i in range(3)}
        x = torch.as_tensor(np.stack(list(obs.values())), dtype=torch.float32)
        with torch.inference_mode():
            mine = client.policies["shared"].module.forward_exploration({"obs": x})["action_dist_inputs"]
            theirs = server.modules["shared"].forward_exploration({"obs": x})["action_dist_inputs"]
        assert torch.equal(mine, theirs)  # the same module, rebuilt from the spec, with the same weights
        # a step batch with one bad step is refused whole; nothing of it is kept
        eid = client.start_episode()
        good = {"obs": {"agent_0": [0.0] * 18}, "actions": {"agent_0": 1}, "logp": {"agent_0": -1.6},
                "vf": {"agent_0": 0.0}, "rewards": {"agent_0": 1.0}}
        bad = {**good, "actions": {"agent_0": 9}}
        with pytest.raises(PolicyServerError, match=r"steps\[1\]: action of 'agent_0' must be an element of Discrete\(5\)"):
            client._post(f"/episodes/{eid}/steps", {"weights_version": 1, "steps": [good, bad]})
        no_vf = {**good, "vf": {}}
        with pytest.raises(PolicyServerError, match="'vf' of 'agent_0' must be a finite number"):
            client._post(f"/episodes/{eid}/steps", {"weights_version": 1, "steps": [no_vf]})
        assert not server.episodes[eid].rows
        client.end_episode(eid)
        # steps reach the server at least every send_every_s seconds, however many are due (silent episodes are dropped)
        timely = PolicyClient(address, inference="local", update_interval_s=60.0, send_every=10**6, send_every_s=1e-6)
        eid = timely.start_episode()
        for _ in range(3):
            timely.get_action(eid, obs)
            timely.log_returns(eid, {a: -1.0 for a in obs})
        assert [len(r["obs"]) for r in server.episodes[eid].rows.values()] == [2, 2, 2]  # the third goes with the next
        timely.end_episode(eid, obs)

        thread, stop = player(address, inference="local", update_interval_s=0.0)
        first = server.weights_version
        results = [algo.train() for _ in range(3)]
        stop.set()
        thread.join(timeout=HANG_S)
        r = results[-1]
        assert r["counters/external/local_steps"] >= 3 * 125 and r.get("counters/external/refused/400") == 2
        assert r["losses/shared/num_sgd_steps"] > 0
        assert server.weights_version >= first + 2  # the learner moved on and the server serves its weights
        assert r["counters/external/weights_sent"] >= 4  # 1 above + the thread's client pulled each of the 3 versions
        assert math.isfinite(r["episode_return_mean"])
    finally:
        algo.stop()


def test_a_backlog_of_client_steps_is_trained_in_batches_of_the_configured_size():
    """With the backlog unbounded (`max_backlog_steps` raised, as this file's servers are), clients the server acts
    for go on stepping while the learner trains, so the server can hold several train batches' worth (under load
    3,250 env steps for 500). Each batch is still train_batch_size agent
    steps, within one piece (an episode: 25 env steps), not the whole backlog at once: a budget is the same number of
    updates at any load. (Emitting a drain as one batch fails: the first iteration trains on all of it.)"""
    port = free_port()
    algo = serving_algo(port, ["training.train_batch_size=250"])
    server = next(d["operator"] for _, d in algo.workflow.graph.nodes(data=True) if d["op"] == "serve").server

    def backlog() -> int:
        with server.lock:
            return sum(steps for _, steps, _ in server.pieces)

    try:
        thread, stop = player(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + HANG_S
        while backlog() < 1000 and time.monotonic() < deadline:  # four batches' worth before any training
            time.sleep(0.05)
        stop.set()
        thread.join(timeout=HANG_S)
        assert backlog() >= 1000
        for _ in range(3):  # all from the backlog: no client now
            n = algo.train()["env_steps_this_iter"]
            # train_batch_size counts agent steps (rows): 250 rows of 3 agents acting every step, within one episode
            assert 250 <= 3 * n < 250 + 3 * 25, n
    finally:
        algo.stop()


def test_with_the_default_backlog_bound_clients_run_one_piece_ahead_of_training():
    """`marl serve`'s default bound (`max_backlog_steps` 1): once one piece (an episode, 25 env steps) waits for
    training, the next request that would add steps waits (the test above shows what an unbounded server piles up
    instead: steps that train ever later as the load grows). Training takes the waiting pieces one a record and the
    client goes on; a batch then holds at most one piece acted before the previous update. Without the bound the
    backlog passes 25 env steps and nothing waits: the first check fails."""
    port = free_port()
    algo = serving_algo(port, ["training.train_batch_size=250"], max_backlog_steps=1, end_grace_s=1.0)
    server = next(d["operator"] for _, d in algo.workflow.graph.nodes(data=True) if d["op"] == "serve").server

    def state() -> tuple[int, int, int]:
        with server.lock:
            return server.backlog_steps, server.counters.get("external/backlog_waits", 0), server.counters.get("external/actions", 0)

    thread, stop = player(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + HANG_S  # bounds a hang only: the loop ends on what the server did
        while time.monotonic() < deadline:
            backlog, waits, actions = state()
            if waits or backlog > 25:
                break
            time.sleep(0.01)
        assert (backlog, waits, actions) == (25, 1, 3 * 25)  # one episode waits, the client's next action request too
        lags = []
        for _ in range(3):
            result = algo.train()
            assert 250 <= 3 * result["env_steps_this_iter"] < 250 + 3 * 25, result["env_steps_this_iter"]
            lags.append(result["perf/policy_lag_max"])
        assert max(lags) <= 1, lags
    finally:
        stop.set()
        algo.stop(reason="the test is over")  # a request still waiting is answered 503 with it: the player ends
        thread.join(timeout=HANG_S)


@pytest.mark.parametrize("feature", ["observation_filter", "connectors", "action_mask", "recurrent", "mappo"])
def test_what_serve_cannot_do_is_one_config_error_at_start(feature):
    """Each feature marl serve does not support is refused before the server starts, naming the feature."""
    scenario = str(ROOT / "scenarios/simple_spread_serve.yaml")
    config = {
        "observation_filter": lambda: marl.load_scenario(scenario, ["env_runners.observation_filter=mean_std"]),
        "connectors": lambda: marl.load_scenario(scenario).connectors(env_to_module=[{"name": "prev_action_reward"}]),
        "action_mask": lambda: marl.PPOConfig().environment("pettingzoo.classic.connect_four_v3"),
        "recurrent": lambda: marl.load_scenario(scenario).training(model={"recurrent": "lstm", "cell_size": 16}),
        "mappo": lambda: marl.load_scenario(str(ROOT / "scenarios/simple_spread_mappo.yaml")),
    }[feature]()
    expected = {"observation_filter": "remove connectors.env_to_module.*observation_filter .it is 'mean_std'",
                "connectors": "takes observations as clients send them", "action_mask": "observes an action mask",
                "recurrent": "keeps no recurrent state per episode", "mappo": "MAPPO reads the env's global state"}[feature]
    port = free_port()
    with pytest.raises(ConfigError, match=expected):
        serving_config(config, "127.0.0.1", port).build()
    with socket.socket() as s:  # nothing was left listening
        s.bind(("127.0.0.1", port))


def test_serving_beyond_this_machine_needs_a_token(monkeypatch):
    monkeypatch.delenv("MARL_SERVE_TOKEN", raising=False)
    config = marl.load_scenario(str(ROOT / "scenarios/simple_spread_serve.yaml"))
    with pytest.raises(ConfigError, match="serving on 0.0.0.0 .* needs a token"):
        serving_config(config, "0.0.0.0", free_port()).build()


def test_a_client_killed_mid_episode_is_dropped_and_training_goes_on(monkeypatch):
    """The server's clock moves only when the test moves it, so which episodes count as silent depends on what
    was played, not on how fast the machine plays it: when the clock jumps past `episode_timeout_s`, the only open
    episode is the killed client's."""
    clock = FakeClock()
    monkeypatch.setattr(server_module, "time", clock)
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    algo = serving_algo(port, ["training.train_batch_size=375"], episode_timeout_s=1.0)
    try:
        thread, stop = player(address)
        doomed = subprocess.Popen([sys.executable, "-c", (
            "import sys, numpy as np; sys.path.insert(0, 'examples'); from marl.external import PolicyClient\n"
            f"c = PolicyClient('{address}'); e = c.start_episode()\n"
            "obs = {f'agent_{i}': np.zeros(18) for i in range(3)}\n"
            "for _ in range(5): c.get_action(e, obs); c.log_returns(e, {a: -1.0 for a in obs})\n"
            "print('mid-episode', flush=True)\nimport time; time.sleep(600)\n")],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert doomed.stdout.readline().strip() == "mid-episode"
        doomed.kill()  # dies mid-episode, never ends it
        doomed.wait()
        r = algo.train()
        assert r.get("counters/external/episodes_dropped", 0) == 0  # silent, but no time has passed on the server's clock
        stop.set()  # the player ends the episode it is in, then stops: the killed client's is the only open one
        thread.join(timeout=HANG_S)
        clock.sleep(1.5)  # past episode_timeout_s
        thread, stop = player(address, seed=1)
        r = algo.train()
        stop.set()
        thread.join(timeout=HANG_S)
        assert r["counters/external/episodes_dropped"] == 1
        assert r["counters/external/episodes_completed"] >= 4
        assert r["losses/shared/num_sgd_steps"] > 0
    finally:
        algo.stop()


def _wait_for_line(path: Path, prefix: str, proc: subprocess.Popen, bound_s: float = 600.0) -> str:
    """The first line of `path` starting with `prefix`, once `proc` has written it (the bound only ends a hang)."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline and proc.poll() is None:
        for line in path.read_text().splitlines():
            if line.startswith(prefix):
                return line
        time.sleep(0.1)
    raise AssertionError(f"no '{prefix}' line from the process (exit {proc.poll()}):\n{path.read_text()[-3000:]}")


def _log_tails(tmp_path: Path) -> str:
    return "".join(f"\n--- {name} (last 3000 characters) ---\n{(tmp_path / name).read_text()[-3000:]}"
                   for name in ("server.log", "client.log") if (tmp_path / name).exists())


@pytest.mark.slow
@pytest.mark.parametrize("inference", ["remote", "local"])
def test_external_client_process_drives_simple_spread_ppo_above_random(tmp_path, inference):
    """`marl serve` and examples/external_client.py as two processes, until PPO's return is above random: the
    server acting for the client (remote), or the client acting itself with weights it pulls every second
    (local: its steps carry its own log-probs and weights version).

    Measured under a load average of 12-37 on 2 cores (other sessions' tests and training beside it,
    2026-11-28), 5-iteration means of the episode return (random -79):
    - remote, 25k env steps, seeds 0-6: -60.1 / -59.8 / -59.3 / -60.6 / -61.2 / -58.6 / -60.7 (idle, earlier:
      -58.5 / -61.3 / -60.4); with training.lr=0: -80.3. Threshold random + 10 on the last 5 iterations.
    - local learns slower and spreads wider: at 30k, 10 runs of seeds 0-4 gave -69.5 / -68.8 / -64.1 / -60.8 /
      -60.9 / -63.2 / -64.5 / -75.3 / -63.7 / -63.1 (pulling weights every step instead of every second: -69.5
      and -60.9 for seeds 0 and 1, so the pull interval is not why); at 40k, seeds 0-4: last-10 means -61.4 /
      -60.5 / -71.0 / -61.6 / -62.5. Its clip fraction runs higher than remote's (0.24-0.33 against 0.20-0.24)
      and its entropy falls later. Not a data-path fault (looked at 2026-11-28): a local client's rows are the
      remote path's -- the same module and weights (logits, log-probs and values equal the server's after
      training, value head included), rewards aligned with the next observation alike (correlation of each row's
      reward with the spread term computed from its next observation: 0.969 local, 0.974 remote), the same
      truncation bootstraps -- and with server and client in one process (seeds 0/1, 20k env steps, last 5
      iterations) remote gave -60.3/-66.8, local pulling every step -64.4/-63.3 at the same policy lag (0.12),
      local pulling every second -66.0/-64.2 at lag 0.85: the spread of this task at this budget, not a mode's.
      So: 40k env steps and the last 10 iterations at random + 5; with lr=0 the weights never change (random).
    The batches stay 500 env steps (within one 25-step episode) whatever the load:
    the serve node hands the server's pieces to `concat` one by one
    (test_a_backlog_of_client_steps_is_trained_in_batches_of_the_configured_size), and clients run at most one
    piece ahead of training (`--max-backlog` 1, test_with_the_default_backlog_bound_clients_run_one_piece_ahead_of_training):
    before that bound a run failed 1 of 5 at load 7 (clients kept stepping while the learner trained, and those
    steps trained ever later as the load grew). With it (2026-11-29, load 6-10, two busy loops beside): remote, 25k,
    seed 0 gave -56.4 in 5 runs of 5 (the same number: the batches no longer depend on timing), seeds 1-3 -60.3 /
    -57.1 / -67.4 (seed 3 still rising), policy lag at most 1; lr=0: -80.3. The server picks its own port (no race for a port chosen
    beforehand); both processes' logs are kept and printed on failure.
    """
    import json

    steps, window, margin = (25_000, 5, 10.0) if inference == "remote" else (40_000, 10, 5.0)
    server_log, client_log = (tmp_path / "server.log").open("w"), (tmp_path / "client.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "marl.cli", "serve", "scenarios/simple_spread_serve.yaml", "--port", "0",
         "--output", str(tmp_path / "run"), f"stop.env_steps_total={steps}"],
        cwd=ROOT, stdout=server_log, stderr=subprocess.STDOUT)
    client = None
    try:
        serving = _wait_for_line(tmp_path / "server.log", "serving ", server)
        address = serving.split(" on ")[1].split()[0]
        # More episodes than the server needs: it stops at its stop criterion, then the client is let go.
        client = subprocess.Popen(
            [sys.executable, "examples/external_client.py", "--address", address, "--episodes", "5000",
             "--inference", inference, "--update-interval", "1.0"],
            cwd=ROOT, stdout=client_log, stderr=subprocess.STDOUT)
        # The bound only ends a hang: under heavy load a run took 19 minutes here.
        assert server.wait(timeout=HANG_S) == 0, _log_tails(tmp_path)  # its stop criterion met; the client loses it
    finally:
        for proc in (server, client):
            if proc is not None and proc.poll() is None:
                proc.kill()
        server_log.close()
        client_log.close()
    results = [json.loads(line) for line in (tmp_path / "run" / "result.jsonl").read_text().splitlines()]
    # (an iteration in which no episode ended has no mean: null in result.jsonl)
    returns = [r["episode_return_mean"] for r in results if r["episode_return_mean"] is not None
               and not math.isnan(r["episode_return_mean"])]
    assert results[-1]["env_steps_total"] >= steps
    local_steps = results[-1].get("counters/external/local_steps", 0)
    assert (local_steps >= steps) if inference == "local" else (local_steps == 0), local_steps  # who acted
    late = float(np.mean(returns[-window:]))
    curve = [round(r, 1) for r in returns]
    print(f"{inference}: {late:.1f} over the last {window} iterations to {results[-1]['env_steps_total']} env steps")
    assert late >= RANDOM_SIMPLE_SPREAD + margin, (
        f"return {late:.1f} after {results[-1]['env_steps_total']} env steps in {len(results)} iterations; "
        f"returns {curve}; policy lag {[r.get('perf/policy_lag_mean') for r in results[-5:]]}{_log_tails(tmp_path)}")
    assert (tmp_path / "run" / "checkpoint").is_dir()  # checkpoints like any algorithm
