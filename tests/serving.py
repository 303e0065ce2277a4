"""What the policy-server tests share: a free local port and a serving Algorithm of the serving scenario."""

from __future__ import annotations

import socket
from pathlib import Path

import marl
from marl.cli.serve import serving_config

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "scenarios/simple_spread_serve.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving_algo(port, overrides=(), **serve):
    """A serving Algorithm of `scenarios/simple_spread_serve.yaml` (with `overrides`); with no bound on the backlog
    unless given: these tests play without training (the bound has its own test), and a bounded backlog would hold
    their requests."""
    serve.setdefault("max_backlog_steps", 10**9)
    config = marl.load_scenario(str(ROOT / SCENARIO), list(overrides))
    return serving_config(config, "127.0.0.1", port, **serve).build()
