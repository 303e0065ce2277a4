"""Checkpoints: the directory format (`directory`: layout, saving and restoring an Algorithm's parts), atomic
writing (`atomic`), the manifest with its schema versions and migrations (`manifest`), deploy-time loading of a
policy's module and connectors (`deploy`), and the state files a checkpoint is made of (`state_files`: JSON
structure plus safetensors arrays, nothing pickled)."""

from marl.checkpoint.deploy import load_connector_state, load_connectors, load_module, load_policy
from marl.checkpoint.directory import restore_algorithm, save_algorithm
from marl.checkpoint.manifest import read_manifest
from marl.checkpoint.state_files import StateFileError, read_tree, write_tree
from marl.errors import CheckpointError

__all__ = ["CheckpointError", "StateFileError", "load_connector_state", "load_connectors", "load_module", "load_policy",
           "read_manifest",
           "read_tree", "restore_algorithm", "save_algorithm", "write_tree"]
