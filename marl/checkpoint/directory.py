"""Checkpoint directories: their layout, and saving and restoring an Algorithm's parts in them.

Layout of schema version 2 (`manifest.json` is written last):

    manifest.json                 schema and marl versions, algorithm, resolved config,
                                  iteration, policies (module class, model, spaces, file)
    policies/<policy>.safetensors each policy's weights
    learner/state.{json,safetensors}    optimisers, observation-filter statistics,
                                  weights version, learner RNG states (and whatever
                                  else the Learner's get_state() returns)
    algorithm.json                counters, report totals, driver RNG states
    runners/<i>.{json,safetensors}      each env runner's RNG states and in-progress episodes
    extra/<name>.{json,safetensors}     registered components (e.g. replay buffers)

`save_algorithm` / `restore_algorithm` write and read an `Algorithm`'s parts
(what `Algorithm.save` / `restore` do). Nothing is pickled: structure is JSON,
arrays are safetensors (see `state_files`). A checkpoint is written to a temporary sibling directory and
renamed into place; a save killed at any point leaves either the previous
checkpoint or the new one, whole (see `commit_directory`).

The other jobs of the format have their own modules, all still importable from here: atomic directories
(`marl.checkpoint.atomic`), the manifest with its schema versions and migrations (`marl.checkpoint.manifest`),
deploy-time loading of a policy's module and connectors (`marl.checkpoint.deploy`).
"""

from __future__ import annotations

import logging
import os
import random
import re
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file

from marl.checkpoint.atomic import commit_directory, new_temp_directory
from marl.checkpoint.deploy import load_policy_weights
from marl.checkpoint.manifest import SCHEMA_VERSION, marl_version, read_manifest, space_to_json, write_manifest
from marl.checkpoint.state_files import StateFileError, fsync_file, read_tree, write_tree
from marl.config.plain_data import plain_data as _plain
from marl.errors import CheckpointError

log = logging.getLogger(__name__)


def _save_step_hook(step: str) -> None:
    """A test hook: called with the name of each step of a save, so a test can kill the process there."""


def save_step(step: str) -> None:
    _save_step_hook(step)


# -- names ---------------------------------------------------------------------
def file_stem(name: str, taken: set[str] | None = None) -> str:
    """A file name for a policy id or component name: unusual characters become '_' ('replay/p' -> 'replay_p').

    With `taken`, a name that would collide with one already used gets a numeric suffix
    (the manifest maps names to files, so any unique stem works).
    """
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "_"
    if taken is not None:
        base, n = stem, 1
        while stem in taken:
            n += 1
            stem = f"{base}-{n}"
        taken.add(stem)
    return stem


# -- an algorithm's checkpoint ------------------------------------------------------------
def save_algorithm(algo, path: str | os.PathLike, *, skip: tuple[str, ...] | list[str] = ()) -> str:
    """Writes a checkpoint directory atomically; returns its path.

    `skip`: registered components to leave out (a name, or a prefix ending
    in '/', e.g. "replay/" for every replay buffer); they keep their fresh
    state at restore.
    """


    path = Path(path)
    tmp = new_temp_directory(path)
    learner = algo.learners.get_state()
    weights = learner["weights"]
    trained = algo.config.trained_policy_ids(list(algo.policy_specs))
    policies, taken = {}, set()
    (tmp / "policies").mkdir()
    for pid, state in weights["modules"].items():
        file = f"policies/{file_stem(pid, taken)}.safetensors"
        save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(tmp / file))
        fsync_file(tmp / file)
        spec, plan = algo.policy_specs[pid], algo.config.plan_for(pid)
        policies[pid] = {
            "file": file,
            "module_class": _plain(plan.module_class),
            "model": _plain(plan.model),
            "observation_space": space_to_json(spec.observation_space),
            "action_space": space_to_json(spec.action_space),
            "trained": pid in trained,
        }
    save_step("policies_written")
    learner["weights"] = {k: v for k, v in weights.items() if k != "modules"}  # the weights are in policies/
    write_tree(learner, tmp / "learner", "state")
    save_step("learner_written")
    runner_states = algo.runners.get_states()
    for i, state in enumerate(runner_states):
        write_tree(state, tmp / "runners", str(i))
    evaluation_states = algo.evaluation.get_states()
    for i, state in enumerate(evaluation_states):
        write_tree(state, tmp / "evaluation_runners", str(i))
    save_step("runners_written")
    extra, taken = {}, set()
    for name, component in algo.context.checkpointables.items():
        if any(name == s or (s.endswith("/") and name.startswith(s)) for s in skip):
            continue
        stem = file_stem(name, taken)
        write_tree(component.get_state(), tmp / "extra", stem)
        extra[name] = stem
    save_step("extra_written")

    write_tree(
        {
            "iteration": algo.iteration,
            "counters": dict(algo.metrics.counters),
            "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
        },
        tmp,
        "algorithm",
    )
    write_manifest(tmp, {
        "schema_version": SCHEMA_VERSION,
        "marl_version": marl_version(),
        "algo": algo.config.algo_name,
        "config": algo.config.to_dict(),
        "imports": list(algo.config.user_modules),  # the user's modules (also in config): imported again on load
        "agents": list(algo.possible_agents),  # the env's agents in order: a deployed policy's agent_index
        "iteration": algo.iteration,
        "weights_version": weights["version"],
        "counters": dict(algo.metrics.counters),  # for people and tools; restore reads algorithm.json
        "policies": policies,
        "runners": len(runner_states),
        "evaluation_runners": len(evaluation_states),
        "extra": extra,
    })
    save_step("manifest_written")
    commit_directory(tmp, path, on_step=save_step)
    return str(path)


def restore_algorithm(algo, path: str | os.PathLike) -> None:
    """Continues from a checkpoint of the same algorithm and policies (any number of env runners)."""
    path = Path(path)
    manifest = read_manifest(path)
    _check_compatible(algo, path, manifest)
    try:
        if "v1" in manifest:
            _restore_v1(algo, path, manifest)
        else:
            _restore_v2(algo, path, manifest)
    except StateFileError as err:
        raise CheckpointError(f"checkpoint '{path}' is damaged: {err}") from None
    algo.sync_runners()


def _check_compatible(algo, path: Path, manifest: dict) -> None:
    saved_algo = manifest.get("algo")
    if saved_algo != algo.config.algo_name:
        raise CheckpointError(f"checkpoint '{path}' is a {saved_algo} checkpoint; this algorithm is {algo.config.algo_name}")
    saved, ours = set(manifest["policies"]), set(algo.policy_specs)
    if saved != ours:
        raise CheckpointError(
            f"checkpoint '{path}' has policies {sorted(saved)}; this algorithm has {sorted(ours)} "
            f"(missing: {sorted(ours - saved)}, extra: {sorted(saved - ours)})"
        )


def _load_learner(algo, path: Path, learner: dict) -> None:
    trained = set(algo.config.trained_policy_ids(list(algo.policy_specs)))
    learner["optimizers"] = {pid: s for pid, s in learner["optimizers"].items() if pid in trained}
    try:
        algo.learners.set_state(learner)
    except (RuntimeError, KeyError, ValueError) as err:
        raise CheckpointError(
            f"checkpoint '{path}' does not fit this algorithm's modules: {str(err).splitlines()[0]}"
        ) from None


def _restore_v2(algo, path: Path, manifest: dict) -> None:
    learner = read_tree(path / "learner", "state")
    learner["weights"]["modules"] = {pid: load_policy_weights(path, manifest, pid) for pid in manifest["policies"]}
    # A fresh compile: operators start from clean buffers; their counters and the report's totals are set below.
    algo.reset_workflow()
    algo.metrics.timers.clear()
    _load_learner(algo, path, learner)
    algorithm = read_tree(path, "algorithm")
    algo.iteration = int(algorithm["iteration"])
    algo.metrics.counters.clear()
    algo.metrics.counters.update(algorithm["counters"])
    algo.metrics.drain_episodes()
    runner_states = [read_tree(path / "runners", str(i)) for i in range(manifest["runners"])]
    algo.runners.set_states(runner_states)
    evaluation_states = [read_tree(path / "evaluation_runners", str(i)) for i in range(manifest["evaluation_runners"])]
    algo.evaluation.set_states(evaluation_states)
    for name, stem in manifest["extra"].items():
        component = algo.context.checkpointables.get(name)
        if component is None:
            log.warning("checkpoint '%s' holds state for '%s', which this algorithm does not have; ignored", path, name)
            continue
        component.set_state(read_tree(path / "extra", stem))
    for name in set(algo.context.checkpointables) - set(manifest["extra"]):
        log.warning("checkpoint '%s' has no state for '%s'; it starts fresh", path, name)
    rng = algorithm["rng"]  # last: nothing above may draw from the driver's generators afterwards
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])


def _restore_v1(algo, path: Path, manifest: dict) -> None:
    """Schema 1: weights, optimisers, connectors and counters; runners start new episodes."""

    modules = {pid: load_policy_weights(path, manifest, pid) for pid in manifest["policies"]}
    connectors = {
        pid: {k: (float(v) if k == "count" else np.asarray(v)) for k, v in s.items()}
        for pid, s in manifest["v1"]["connectors"].items()
    }
    try:
        optimizers = torch.load(path / manifest["v1"]["optimizers"], weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint '{path}' is incomplete: {manifest['v1']['optimizers']} is missing") from None
    learner = {"weights": {"version": manifest["weights_version"], "modules": modules, "connectors": connectors},
               "optimizers": optimizers}
    _load_learner(algo, path, learner)
    algo.metrics.counters.clear()
    algo.metrics.counters.update(manifest["counters"])
    algo.iteration = manifest["iteration"]
    log.warning("checkpoint '%s' has schema version 1: no runner or RNG state, the run goes on with new episodes", path)
