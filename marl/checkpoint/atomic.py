"""Atomic checkpoint directories: a checkpoint is written to a temporary sibling directory and renamed into
place; a save killed at any point leaves either the previous checkpoint or the new one, whole.

Its own module because replacing a directory atomically (and finishing a replacement a kill interrupted) is a
job apart from what goes into the directory (`marl.checkpoint.directory`) and from reading its manifest
(`marl.checkpoint.manifest`, which runs `recover` before every read).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from marl.checkpoint.state_files import fsync_dir
from marl.errors import CheckpointError

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"  # written last: a directory holding it is a whole checkpoint


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


def commit_directory(tmp: Path, path: Path, on_step: Callable[[str], None] = lambda step: None) -> None:
    """Moves the finished `tmp` to `path`, replacing any previous checkpoint there.

    POSIX cannot rename a directory over a non-empty one, so the previous
    checkpoint is first renamed aside to `.<name>.old`. A kill between the two
    renames leaves it there, whole: `recover` (run by every load and save)
    moves it back. `on_step` is called with the name of each step taken (the save's test hook,
    `marl.checkpoint.directory.save_step`).
    """
    recover(path)
    if path.exists():
        if not (path / MANIFEST).is_file():
            raise CheckpointError(f"'{path}' exists and is not a marl checkpoint; refusing to replace it")
        old = _old_of(path)
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        on_step("previous_moved_aside")
        os.replace(tmp, path)
        fsync_dir(path.parent)
        on_step("renamed")
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)
        fsync_dir(path.parent)
        on_step("renamed")
