"""Joining a Ray cluster (`--address`, RAY_ADDRESS): a refusal is one line, and for a missing authentication
token it names RAY_AUTH_MODE=token. Ray's connect is replaced by a stand-in that behaves as Ray 2.5x does
against a token-auth cluster (its core logs a retry line a second to stderr, then ConnectionError), so no
cluster is started here; tests/test_cluster.py joins real ones."""

from __future__ import annotations

import os

import pytest
import ray

from marl.cli.main import main
from marl.errors import ClusterError
from marl.execution.ray_init import ensure_ray

RETRY = (b"[2026-11-28 09:52:15,155 W 20283 20283] gcs_client.cc:210: Failed to get cluster ID from GCS server: "
         b"Unauthenticated: RPC error: InvalidAuthToken: Authentication token is missing or incorrect\n")


def refusing(lines: bytes):
    def init(address=None, **kw):
        for _ in range(20):
            os.write(2, lines)  # as Ray's C++ core writes: to file descriptor 2, not through sys.stderr
        raise ConnectionError(f"Failed to connect to Ray cluster at {address}")
    return init


@pytest.fixture
def address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)


def test_a_missing_token_is_one_line_naming_ray_auth_mode(address, monkeypatch, capfd):
    monkeypatch.setattr(ray, "init", refusing(RETRY))
    with pytest.raises(ClusterError) as refused:
        ensure_ray()
    assert str(refused.value).startswith("the Ray cluster at 10.0.0.1:6379 refused this process: it requires an "
                                         "authentication token and none was sent; export RAY_AUTH_MODE=token")
    assert "InvalidAuthToken" not in capfd.readouterr().err  # the 20 retry lines are held back


def test_another_refusal_is_one_line_and_what_ray_printed_is_dropped(address, monkeypatch, capfd):
    monkeypatch.setattr(ray, "init", refusing(b"gcs_client.cc: Failed to connect to GCS at 10.0.0.1:6379\n"))
    with pytest.raises(ClusterError, match=r"^cannot join the Ray cluster at 10.0.0.1:6379: Failed to connect"):
        ensure_ray()
    assert capfd.readouterr().err == ""


def test_a_joined_cluster_keeps_what_ray_printed(address, monkeypatch, capfd):
    joined = []
    monkeypatch.setattr(ray, "init", lambda address=None, **kw: (os.write(2, b"Connected to Ray cluster.\n"), joined.append(address)))
    ensure_ray()
    assert joined == ["10.0.0.1:6379"] and capfd.readouterr().err == "Connected to Ray cluster.\n"


def test_marl_evaluate_address_refused_is_one_line(monkeypatch, capfd, tmp_path):
    import marl

    algo = marl.PPOConfig().environment("CartPole-v1").training(train_batch_size=64, minibatch_size=64, num_epochs=1) \
        .env_runners(num_envs_per_env_runner=1, rollout_fragment_length=64).build()
    algo.train()
    algo.save(tmp_path / "ckpt")
    algo.stop()
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refusing(RETRY))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    code = main(["evaluate", str(tmp_path / "ckpt"), "--address", "10.0.0.1:6379", "--num-env-runners", "1", "--episodes", "1"])
    err = capfd.readouterr().err
    assert code == 2 and os.environ.pop("RAY_ADDRESS") == "10.0.0.1:6379"
    assert err.strip().splitlines() == [err.strip()] and "RAY_AUTH_MODE=token" in err and "Traceback" not in err
