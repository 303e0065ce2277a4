"""The line protocol between benchmarks/peers/compare_rllib.py and its task scripts.

A task script (marl_tasks.py in marl's venv, rllib_tasks.py in RLlib's) prints
one line per event: the prefix, then a JSON object with the event name `ev`
and the wall-clock time `t` (time.time(), comparable across processes of one
machine). Everything else on stdout/stderr is the framework's own chatter and
is only kept for the log. No imports beyond the standard library: both venvs
load this file.
"""

from __future__ import annotations

import json
import math
import sys
import time

PREFIX = "@@bench "

# Events, in the order a task emits them:
#   started   {}                                   the script's first line ran (after python start-up)
#   built     {}                                   the algorithm object exists
#   iter      {iter, env_steps, return, episodes}  after every train() call; return: mean over the
#                                                  episodes that finished in this iteration (NaN if none)
#   done      {reason}                             the loop ended (target reached, cap hit)
#   unavailable {why}                              the task cannot run on this side (e.g. no DQN yet)


def emit(event: str, **fields) -> None:
    clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in fields.items()}
    sys.stdout.write(PREFIX + json.dumps({"ev": event, "t": time.time(), **clean}) + "\n")
    sys.stdout.flush()


def parse(line: str) -> dict | None:
    if not line.startswith(PREFIX):
        return None
    try:
        event = json.loads(line[len(PREFIX) :])
    except ValueError:
        return None
    if event.get("return", 0.0) is None:
        event["return"] = math.nan
    return event


def run_loop(train, *, target_return: float | None, max_env_steps: int, max_train_s: float) -> None:
    """Calls `train()` -> (env_steps_total, return_mean, episodes) until a stop, emitting events.

    Shared by both sides so that the stop rule is the same: stop at the first
    iteration whose mean return reaches `target_return` (if given), or once
    `max_env_steps` env steps were sampled, or `max_train_s` seconds after
    the build.
    """
    built = time.time()
    i = 0
    while True:
        env_steps, ret, episodes = train()
        i += 1
        emit("iter", iter=i, env_steps=int(env_steps), episodes=int(episodes), **{"return": float(ret)})
        if target_return is not None and ret == ret and ret >= target_return:
            emit("done", reason=f"return {ret:.1f} >= {target_return:g}")
            return
        if env_steps >= max_env_steps:
            emit("done", reason=f"env steps {env_steps} >= {max_env_steps}")
            return
        if time.time() - built >= max_train_s:
            emit("done", reason=f"time cap {max_train_s:g} s")
            return
