"""Deploy-time loading: one policy's module with its weights, and its connector pipelines with their
statistics, from a checkpoint alone (no algorithm, env or runner is built).

Its own module because serving or evaluating a policy needs only these readers of the manifest
(`marl.checkpoint.manifest`) and the policy files, not the saving and restoring of a whole Algorithm
(`marl.checkpoint.directory`, which re-exports them and reads the weights with `load_policy_weights`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file

from marl.checkpoint.manifest import read_manifest, space_from_json
from marl.checkpoint.state_files import StateFileError, read_tree
from marl.config.scenario import config_from_dict
from marl.connectors import PolicyConnectors, build_policy_module
from marl.errors import CheckpointError, ConfigError
from marl.inference import Policy
from marl.policies import PolicySpec


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


def load_policy(path: str | os.PathLike, policy_id: str = "default_policy", *, seed: int | None = None,
                max_keys: int = 1024) -> Policy:
    """One policy of a checkpoint, ready to act as the run's runners did (`marl.inference.Policy`): its
    env->module connectors with the run's statistics, its module with its weights, its module->env connectors.

        policy = marl.load_policy("runs/spread/checkpoint", "default_policy")
        action = policy.compute_single_action(obs)        # greedy; explore=True samples (seeded by `seed`)
    """
    path = Path(path)
    agents = read_manifest(path).get("agents")  # (checkpoints before it: modules reading agent_index see 0)
    return Policy(load_module(path, policy_id), load_connectors(path, policy_id, num_envs=max_keys),
                  policy_id=policy_id, agents=agents, seed=seed, max_keys=max_keys)


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
