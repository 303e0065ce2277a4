"""Kill a Ray actor and wait until it is gone: `ray.kill` is asynchronous, so a call sent right after it may still be answered."""

from __future__ import annotations

import time

from tests.bounds import HANG_S


def kill_and_wait(ray, actor, timeout_s: float = HANG_S) -> None:
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_call__.remote(lambda _actor: None), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the killed actor still answers after {timeout_s} s")
