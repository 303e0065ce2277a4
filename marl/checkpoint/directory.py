"""Checkpoint directories: layout, atomic writing, schema versions, inference loading.

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
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np

from marl.checkpoint.state_files import StateFileError, fsync_dir, read_tree, write_json, write_tree
from marl.connectors import build_policy_module
from marl.policies import PolicySpec
from marl.config.scenario import config_from_dict
from marl.config.sections import ConfigError
from marl.connectors import PolicyConnectors
from marl.config.sections import plain_data as _plain
from marl.checkpoint.state_files import fsync_file
from importlib.metadata import version
from safetensors.numpy import load_file
import torch
from safetensors.numpy import save_file

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
MANIFEST = "manifest.json"


class CheckpointError(ValueError):
    """A checkpoint that cannot be written or read; the message names the directory and what is wrong."""


def _save_step_hook(step: str) -> None:
    """A test hook: called with the name of each step of a save, so a test can kill the process there."""


def save_step(step: str) -> None:
    _save_step_hook(step)


# -- atomic directories --------------------------------------------------------
def _old_of(path: Path) -> Path:
    return path.with_name(f".{path.name}.old")


def recover(path: Path) -> None:
    """Finishes a save that was killed between its two renames (the previous checkpoint goes back)."""
    path = Path(path)
    old = _old_of(path)
    if not path.exists() and (old / MANIFEST).is_file():
        os.replace(old, path)
        log.warning("checkpoint '%s': an interrupted save was rolled back to the previous checkpoint", path)


def new_temp_directory(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):  # left by saves that were killed
        shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))


def commit_directory(tmp: Path, path: Path) -> None:
    """Moves the finished `tmp` to `path`, replacing any previous checkpoint there.

    POSIX cannot rename a directory over a non-empty one, so the previous
    checkpoint is first renamed aside to `.<name>.old`. A kill between the two
    renames leaves it there, whole: `recover` (run by every load and save)
    moves it back.
    """
    recover(path)
    if path.exists():
        if not (path / MANIFEST).is_file():
            raise CheckpointError(f"'{path}' exists and is not a marl checkpoint; refusing to replace it")
        old = _old_of(path)
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        save_step("previous_moved_aside")
        os.replace(tmp, path)
        fsync_dir(path.parent)
        save_step("renamed")
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)
        fsync_dir(path.parent)
        save_step("renamed")


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


# -- manifest and schema versions ------------------------------------------------
def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of a checkpoint, migrated to the current schema; clear errors otherwise."""
    path = Path(path)
    recover(path)
    file = path / MANIFEST
    if not path.exists():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    if not file.is_file():
        raise CheckpointError(f"'{path}' is not a marl checkpoint (no {MANIFEST})")
    try:
        manifest = json.loads(file.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"checkpoint '{path}': {MANIFEST} is not valid JSON ({err})") from None
    version = manifest.get("schema_version")
    if not isinstance(version, int):
        raise CheckpointError(f"checkpoint '{path}': {MANIFEST} has no integer schema_version")
    if version > SCHEMA_VERSION:
        raise CheckpointError(
            f"checkpoint '{path}' has schema version {version} (written by marl {manifest.get('marl_version', '?')}); "
            f"this marl ({marl_version()}) reads schema versions 1 to {SCHEMA_VERSION}: upgrade marl to load it"
        )
    while version < SCHEMA_VERSION:
        migrate = MIGRATIONS.get(version)
        if migrate is None:
            raise CheckpointError(
                f"checkpoint '{path}' has schema version {version}; this marl ({marl_version()}) reads schema "
                f"versions 1 to {SCHEMA_VERSION} and has no migration from {version}"
            )
        manifest = migrate(manifest, path)
        version = manifest["schema_version"]
    return manifest


def _migrate_1_to_2(manifest: dict, path: Path) -> dict:
    """Schema 1 (marl 0.1.0): policy_<id>.safetensors, optimizers.pt (torch tensors), connectors in the manifest.

    It has no spaces, learner RNG or runner state: the policies' spaces come
    from the config's env when the algorithm is rebuilt, and a resumed run
    starts fresh episodes.
    """
    out = dict(manifest)
    out["schema_version"] = 2
    out["migrated_from"] = 1
    out["policies"] = {pid: {"file": f"policy_{pid}.safetensors"} for pid in manifest.get("policies", [])}
    out["v1"] = {"optimizers": "optimizers.pt", "connectors": manifest.get("connectors", {})}
    return out


MIGRATIONS: dict[int, Callable[[dict, Path], dict]] = {1: _migrate_1_to_2}


def marl_version() -> str:
    try:
        return version("marl")
    except Exception:
        return "0+unknown"


# -- spaces as JSON ------------------------------------------------------------------
def space_to_json(space: gym.Space) -> dict:
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(), "shape": list(space.shape),
                "dtype": np.dtype(space.dtype).str}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": np.asarray(space.nvec).tolist(), "start": np.asarray(space.start).tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_to_json(s) for k, s in space.spaces.items()}}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise CheckpointError(f"cannot store a {type(space).__name__} space in a checkpoint manifest")


def space_from_json(data: dict) -> gym.Space:
    kind = data["type"]
    if kind == "Box":
        dtype = np.dtype(data["dtype"])
        return gym.spaces.Box(np.asarray(data["low"], dtype), np.asarray(data["high"], dtype), tuple(data["shape"]), dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(data["n"], start=data["start"])
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(np.asarray(data["nvec"]), start=np.asarray(data["start"]))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(data["n"])
    if kind == "Dict":
        return gym.spaces.Dict({k: space_from_json(s) for k, s in data["spaces"].items()})
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_json(s) for s in data["spaces"]])
    raise CheckpointError(f"unknown space type '{kind}' in a checkpoint manifest")


# -- loading weights ------------------------------------------------------------------
def load_policy_weights(path: Path, manifest: dict, policy_id: str) -> dict[str, np.ndarray]:
    entry = manifest["policies"].get(policy_id)
    if entry is None:
        raise CheckpointError(f"checkpoint '{path}' has no policy '{policy_id}'; it has {sorted(manifest['policies'])}")
    file = path / entry["file"]
    try:
        return load_file(str(file))
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint '{path}' is incomplete: {entry['file']} is missing") from None
    except Exception as err:  # safetensors reports corrupt headers with its own error types
        raise CheckpointError(f"checkpoint '{path}': cannot read {entry['file']} ({err})") from None


def load_module(path: str | os.PathLike, policy_id: str = "default_policy"):
    """The RLModule of one policy of a checkpoint, with its weights, ready for inference.

    No algorithm, env or runner is built: the module class, its model options
    and its spaces come from the manifest. Act with
    `module.forward_inference({"obs": obs_tensor})`; observations are what the
    policy's env->module connector pipeline makes of the env's (flat float32
    vectors, `marl.modules.spaces`, normalised with `observation_filter: mean_std`,
    stacked with `frame_stack`, ...; images stay uint8 arrays of their shape for the
    default modules, whose conv encoders are rebuilt from the recorded model options): `load_connectors` gives that pipeline with its state.
    A recurrent module (`model.recurrent`, recorded with the model options in the
    manifest) returns `state_out`: pass it back as `state_in` at the agent's next
    step (no `state_in`: the initial state, an episode start).
    """


    path = Path(path)
    manifest = read_manifest(path)
    entry = manifest["policies"].get(policy_id)
    if entry is None:
        raise CheckpointError(f"checkpoint '{path}' has no policy '{policy_id}'; it has {sorted(manifest['policies'])}")
    if "observation_space" not in entry:
        raise CheckpointError(
            f"checkpoint '{path}' (schema version {manifest.get('migrated_from', manifest['schema_version'])}) does not "
            "record the policies' spaces; load it with Algorithm.from_checkpoint instead"
        )
    spec = PolicySpec(entry.get("module_class"), {}, space_from_json(entry["observation_space"]), space_from_json(entry["action_space"]))
    try:
        module = build_policy_module(_saved_config(path, manifest), policy_id, spec)
    except ValueError as err:
        raise CheckpointError(f"checkpoint '{path}', policy '{policy_id}': {err}") from None
    state = load_policy_weights(path, manifest, policy_id)
    try:
        module.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint '{path}', policy '{policy_id}': weights do not fit the module: {err}".splitlines()[0]) from None
    module.eval()
    return module


def _saved_config(path: Path, manifest: dict):
    """The run's config as the manifest records it (what the policies' modules and connectors were built from)."""

    try:
        return config_from_dict(dict(manifest["config"]), where=f"checkpoint '{path}'")
    except ConfigError as err:
        raise CheckpointError(str(err)) from None


def load_connectors(path: str | os.PathLike, policy_id: str = "default_policy", num_envs: int = 1, num_agents: int = 1):
    """A policy's connector pipelines (`PolicyConnectors`) as the run used them, with the learner's central
    statistics (mean/std filter) loaded: `to_module(raw_obs, ctx)` gives what `load_module`'s module reads."""

    path = Path(path)
    manifest = read_manifest(path)
    entry = manifest["policies"].get(policy_id)
    if entry is None or "observation_space" not in entry:
        raise CheckpointError(f"checkpoint '{path}' has no policy '{policy_id}' with recorded spaces; it has {sorted(manifest['policies'])}")
    spec = PolicySpec(entry.get("module_class"), {}, space_from_json(entry["observation_space"]), space_from_json(entry["action_space"]))
    connectors = PolicyConnectors(_saved_config(path, manifest), policy_id, spec, num_envs, num_agents)
    connectors.set_central(_central_state(path, manifest).get(policy_id) or {})
    return connectors


def _central_state(path: Path, manifest: dict) -> dict:
    if "v1" in manifest:
        return {pid: {"mean_std": {k: (float(v) if k == "count" else np.asarray(v)) for k, v in s.items()}}
                for pid, s in manifest["v1"]["connectors"].items()}
    try:
        learner = read_tree(path / "learner", "state")
    except StateFileError as err:
        raise CheckpointError(f"checkpoint '{path}': {err}") from None
    return learner["weights"]["connectors"]


def load_connector_state(path: str | os.PathLike, policy_id: str = "default_policy") -> dict | None:
    """The observation-filter statistics ({count, mean, m2}) of a policy, or None if it had no filter
    (every connector's state: `load_connectors`)."""
    path = Path(path)
    central = _central_state(path, read_manifest(path)).get(policy_id) or {}
    if "count" in central:  # written before connector pipelines: the filter's statistics alone
        return central
    return central.get("mean_std")


def write_manifest(directory: Path, manifest: dict) -> None:
    write_json(directory / MANIFEST, manifest)


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
        spec = algo.policy_specs[pid]
        policies[pid] = {
            "file": file,
            "module_class": _plain(algo.config.module_class_for(spec)),
            "model": _plain(algo.config.model_for(pid)),
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
        "iteration": algo.iteration,
        "weights_version": weights["version"],
        "counters": dict(algo.metrics.counters),  # for people and tools; restore reads algorithm.json
        "policies": policies,
        "runners": len(runner_states),
        "evaluation_runners": len(evaluation_states),
        "extra": extra,
    })
    save_step("manifest_written")
    commit_directory(tmp, path)
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
