"""Runs JaxMARL's own PQN-VDN (baselines/QLearning/pqn_vdn_ff.py of a JaxMARL checkout) once and prints one JSON line.

Runs in JaxMARL's venv (benchmarks/setup_jaxmarl.sh), started by compare_jaxmarl_pqn.py:

    benchmarks/.jaxmarl-venv/bin/python benchmarks/jaxmarl_pqn.py SRC '{"TOTAL_TIMESTEPS": 2000000, ...}'

The script's `make_train` and `env_from_config` are imported from SRC unchanged and run as its `single_run`
does (config.yaml merged with alg/pqn_vdn_ff_mpe.yaml, the env through `env_from_config`: MPELogWrapper;
`jax.jit(jax.vmap(make_train(config, env)))` over NUM_SEEDS 1), the given keys overridden in the alg config.
wandb (imported by the script) is replaced by an offline stub that keeps what `wandb.log` is handed: the script's
scan returns no metrics, it reports them only through `jax.debug.callback` -> `wandb.log` once per update, which
runs where WANDB_MODE is not "disabled" (so WANDB_MODE is "offline" here). Nothing is saved (SAVE_PATH None). Prints: start-up (process start to the
compiled train function), training time, env steps, and per update the script's own metrics: the mean over
the update's steps, worlds and agents of MPELogWrapper's `returned_episode_returns` (each agent's reward times
the number of agents, summed over the last finished episode: for simple_spread the mean over agents is the team's
sum of rewards), `returned_episode_lengths`, the loss, and the greedy test return (`test_returned_episode_returns`,
512 worlds every TEST_INTERVAL of the updates, held in between).
"""

from __future__ import annotations

import json
import sys
import time
import types

T0 = time.time()
LOGGED: list[dict] = []  # what the script's callback hands wandb.log, once per update
sys.modules["wandb"] = types.SimpleNamespace(log=lambda metrics, **k: LOGGED.append(metrics),
                                             init=lambda *a, **k: None)  # offline stub

import copy  # noqa: E402
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402  (PyYAML comes with hydra-core/omegaconf)

SCRIPT, ALG = "pqn_vdn_ff.py", "pqn_vdn_ff_mpe.yaml"


def published_config(src: str) -> dict:
    """What `python baselines/QLearning/pqn_vdn_ff.py +alg=pqn_vdn_ff_mpe` runs with: config.yaml and the alg file,
    merged as its single_run merges them (the alg keys over the top-level ones)."""
    conf = Path(src) / "baselines" / "QLearning" / "config"
    top = yaml.safe_load((conf / "config.yaml").read_text()) or {}
    alg = yaml.safe_load((conf / "alg" / ALG).read_text())
    return {**top, **alg}


def main(src: str, overrides: dict) -> dict:
    path = Path(src) / "baselines" / "QLearning" / SCRIPT
    spec = importlib.util.spec_from_file_location("pqn_vdn_ff", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = {**published_config(src), **overrides, "SAVE_PATH": None, "WANDB_MODE": "offline"}
    config["TOTAL_TIMESTEPS"] = int(config["TOTAL_TIMESTEPS"])
    env, _ = module.env_from_config(copy.deepcopy(config))
    rngs = jax.random.split(jax.random.PRNGKey(int(config["SEED"])), int(config["NUM_SEEDS"]))
    train = jax.jit(jax.vmap(module.make_train(config, env)))
    compiled = train.lower(rngs).compile()
    ready, cpu = time.time(), time.process_time()
    jax.block_until_ready(compiled(rngs))  # the metrics come through wandb.log (LOGGED)
    done, cpu = time.time(), time.process_time() - cpu
    logged = sorted(LOGGED, key=lambda m: int(np.asarray(m["update_steps"]).reshape(-1)[0]))
    metrics = {k: np.array([float(np.asarray(m[k]).reshape(-1)[0]) for m in logged]) for k in logged[0]}  # [updates]
    per_update = int(config["NUM_ENVS"]) * int(config["NUM_STEPS"])
    updates = len(metrics["returned_episode_returns"])
    return {"startup_s": ready - T0, "train_s": done - ready, "cpu_s": cpu, "env_steps": per_update * updates,
            "env_steps_per_update": per_update, "num_updates": updates, "config": config,
            "returns": metrics["returned_episode_returns"].tolist(),
            "lengths": metrics["returned_episode_lengths"].tolist(),
            "loss": metrics["loss"].tolist(),
            "test_returns": metrics["test_returned_episode_returns"].tolist(),
            "update_steps": metrics["update_steps"].astype(int).tolist()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], json.loads(sys.argv[2]))))
