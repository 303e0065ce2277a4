"""Runs one of JaxMARL's own baseline scripts (a JaxMARL checkout's baselines/*/*.py) once and prints one JSON line.

Runs in JaxMARL's venv (benchmarks/peers/setup_jaxmarl.sh), started by compare_jaxmarl.py, compare_jaxmarl_pqn.py and
jaxmarl_regression.py:

    benchmarks/.jaxmarl-venv/bin/python benchmarks/peers/jaxmarl_baseline.py SRC SCRIPT ALG '{"SEED": 0, ...}'

SCRIPT is the script's path in the checkout (baselines/IPPO/ippo_ff_mpe.py); ALG the name of its Hydra `alg` group
file for the QLearning scripts (baselines/QLearning/config/alg/ALG.yaml, merged over config/config.yaml as the
script's single_run merges them), or "" for the flat IPPO/MAPPO scripts (their own config, the `config_name` of
their @hydra.main). The script's `make_train` is imported unchanged and run as its `main` does: jitted, one seed
(the QLearning scripts vmap their seeds: NUM_SEEDS is set to 1), its config with the given keys overridden.
wandb (imported by every script, called from a callback every update) is replaced by a stub that keeps what it is
handed. Prints: start-up (process start to the compiled train function), training time and CPU, env steps, and per
update the script's own logged return -- `returns` where the script logs it (MAPPO, the SMAX scripts: their
wandb figure), else the mean of `returned_episode_returns` (IPPO-FF, the QLearning scripts) -- with every other
scalar it logs (`logged`: loss, episode lengths, greedy test returns, ...).
"""

from __future__ import annotations

import json
import sys
import time
import types

T0 = time.time()
LOGGED: list[dict] = []  # what the script's callback hands wandb.log, once per update
sys.modules["wandb"] = types.SimpleNamespace(log=lambda metrics, **k: LOGGED.append(metrics),
                                             init=lambda *a, **k: None, finish=lambda *a, **k: None)

import copy  # noqa: E402
import importlib.util  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402  (Hydra's loader: it reads `1e5` as a number, PyYAML as a string)


def load(path: Path) -> dict:
    """A config file as Hydra hands it to the script: OmegaConf's YAML (vdn_ff_mpe.yaml's BUFFER_SIZE 1e5 a float, which
    the script's int() takes), interpolations such as ${oc.env:WANDB_ENTITY} left as written (only wandb reads them)."""
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}


def published_config(src: str, script: str, alg: str) -> dict:
    """The config `python SCRIPT [+alg=ALG]` runs with."""
    path = Path(src) / script
    conf = path.parent / "config"
    if alg:  # QLearning: config.yaml, then the alg file's keys over it (single_run's {**config, **config["alg"]})
        top = load(conf / "config.yaml")
        top.pop("alg", None)
        return {**top, **load(conf / "alg" / f"{alg}.yaml")}
    name = re.search(r'config_name\s*=\s*"([^"]+)"', path.read_text())
    if name is None:
        raise SystemExit(f"{script}: no @hydra.main config_name to read its config from")
    return load(conf / f"{name.group(1)}.yaml")


def scalar(value) -> float:
    return float(np.asarray(value, dtype=float).mean())


def main(src: str, script: str, alg: str, overrides: dict) -> dict:
    path = Path(src) / script
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = {**published_config(src, script, alg), **overrides}
    config["TOTAL_TIMESTEPS"] = int(float(config["TOTAL_TIMESTEPS"]))  # ("1e7": a str to PyYAML)
    if alg:  # the QLearning scripts log through wandb only when it is not disabled, and save nothing here
        config.update({"NUM_SEEDS": 1, "WANDB_MODE": "offline", "SAVE_PATH": None})
        env, _ = module.env_from_config(copy.deepcopy(config))
        rng = jax.random.split(jax.random.PRNGKey(int(config["SEED"])), 1)
        train = jax.jit(jax.vmap(module.make_train(config, env)))
    else:
        rng = jax.random.PRNGKey(int(config["SEED"]))
        train = jax.jit(module.make_train(config))
    compiled = train.lower(rng).compile()
    ready, cpu = time.time(), time.process_time()
    jax.block_until_ready(compiled(rng))  # the metrics come through wandb.log (LOGGED)
    done, cpu = time.time(), time.process_time() - cpu
    if any("update_steps" in m for m in LOGGED):  # callbacks may arrive out of order
        LOGGED.sort(key=lambda m: scalar(m.get("update_steps", 0)))
    keys = [k for k in LOGGED[0] if not isinstance(LOGGED[0][k], dict)]
    logged = {k: [scalar(m[k]) for m in LOGGED] for k in keys}
    returns = logged.pop("returns", None) or logged["returned_episode_returns"]
    per_update = int(config["NUM_ENVS"]) * int(config["NUM_STEPS"])
    return {"startup_s": ready - T0, "train_s": done - ready, "cpu_s": cpu, "env_steps": per_update * len(returns),
            "env_steps_per_update": per_update, "num_updates": len(returns), "config": config,
            "returns": returns, "logged": logged}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
