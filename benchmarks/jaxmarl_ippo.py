"""Runs JaxMARL's own IPPO (baselines/IPPO/ippo_ff_mpe.py of a JaxMARL checkout) once and prints one JSON line.

Runs in JaxMARL's venv (benchmarks/setup_jaxmarl.sh), started by compare_jaxmarl.py:

    benchmarks/.jaxmarl-venv/bin/python benchmarks/jaxmarl_ippo.py SRC '{"NUM_ENVS": 16, ...}'

The script's `make_train` is imported from SRC unchanged and run as its `main` does (jit, one seed),
its yaml config with the given keys overridden. wandb (imported by the script, called from an
io_callback every update) is replaced by an offline stub. Prints: start-up (process start to the
compiled train function), training time, env steps, and the per-update mean of MPELogWrapper's
`returned_episode_returns` (the summed-over-agents return of the last finished episodes: the wrapper
multiplies each agent's reward by the number of agents).
"""

from __future__ import annotations

import json
import sys
import time
import types

T0 = time.time()
sys.modules["wandb"] = types.SimpleNamespace(log=lambda *a, **k: None, init=lambda *a, **k: None)  # offline stub

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402  (PyYAML comes with hydra-core/omegaconf)


def main(src: str, overrides: dict) -> dict:
    ippo = Path(src) / "baselines" / "IPPO"
    spec = importlib.util.spec_from_file_location("ippo_ff_mpe", ippo / "ippo_ff_mpe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = {**yaml.safe_load((ippo / "config" / "ippo_ff_mpe.yaml").read_text()), **overrides}
    rng = jax.random.PRNGKey(int(config["SEED"]))
    train = jax.jit(module.make_train(config))
    compiled = train.lower(rng).compile()
    ready, cpu = time.time(), time.process_time()
    out = compiled(rng)
    jax.block_until_ready(out)
    done, cpu = time.time(), time.process_time() - cpu
    logged = np.asarray(out["metrics"]["returned_episode_returns"])  # the script already averages it per update
    returns = logged.reshape(logged.shape[0], -1).mean(axis=1)  # [updates]
    per_update = int(config["NUM_ENVS"]) * int(config["NUM_STEPS"])
    return {"startup_s": ready - T0, "train_s": done - ready, "cpu_s": cpu, "env_steps": per_update * len(returns),
            "env_steps_per_update": per_update, "returns": returns.tolist()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], json.loads(sys.argv[2]))))
