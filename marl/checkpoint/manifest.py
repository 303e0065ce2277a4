"""A checkpoint's manifest: reading it (migrated to the current schema version, with clear errors), writing it,
and the spaces it records as JSON (in `marl.data.spaces_json`'s form, which the policy server's wire shares).

Its own module because the manifest is what every reader of a checkpoint starts from (deploy-time loading,
`marl.checkpoint.deploy`; restoring an Algorithm, `marl.checkpoint.directory`) and its schema versions and
migrations are one job: a new schema version is a new entry of `MIGRATIONS` here.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import gymnasium as gym

from marl.checkpoint.atomic import MANIFEST, recover
from marl.checkpoint.state_files import write_json
from marl.data import spaces_json
from marl.data.spaces_json import SpaceJsonError
from marl.errors import CheckpointError

SCHEMA_VERSION = 2


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


# -- spaces as JSON (`marl.data.spaces_json`: the one form, read in its earlier variants too) --------------
def space_to_json(space: gym.Space) -> dict:
    try:
        return spaces_json.space_to_json(space)
    except SpaceJsonError as err:
        raise CheckpointError(f"cannot store a space in a checkpoint manifest: {err}") from None


def space_from_json(data: dict) -> gym.Space:
    try:
        return spaces_json.space_from_json(data)
    except SpaceJsonError as err:
        raise CheckpointError(f"a space in a checkpoint manifest: {err}") from None


def write_manifest(directory: Path, manifest: dict) -> None:
    write_json(directory / MANIFEST, manifest)
