"""Run directories on shared or remote storage: `--output` / `checkpointing.storage` as a filesystem URI.

A URI (`file:///shared/runs/x`, `s3://bucket/runs/x`, `gs://...`, `memory://...`: any filesystem fsspec
knows, as Ray Train's `storage_path`) is the run directory's home. The run writes into a local staging
copy (`$MARL_STAGING_DIR`, else the system's temporary folder) and `RunStorage.sync` uploads what changed:
after each checkpoint and when the run stops (a stop criterion, a signal, a failure). A checkpoint is
uploaded whole under `checkpoint.new/` first and then takes `checkpoint/`'s place, so a kill during an
upload leaves the previous checkpoint, or the new one, complete (`download` picks whichever is). A plain
path is a local (or mounted) folder, written directly as before.

`marl train --resume URI` downloads the run directory into staging first, then continues it there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import fsspec

from marl.errors import ConfigError

CHECKPOINT = "checkpoint"
UPLOADING = "checkpoint.new"  # a checkpoint upload in progress (complete once its manifest.json is there)
MANIFEST = "manifest.json"


def is_uri(value) -> bool:
    """A filesystem URI (scheme://...) rather than a local path."""
    return "://" in str(value)


def filesystem(uri: str, name: str):
    """(fsspec filesystem, path inside it) of `uri`; an unknown scheme or a missing driver package is one line."""
    try:
        return fsspec.core.url_to_fs(uri)
    except ImportError as err:
        raise ConfigError(f"{name} {uri}: its filesystem needs a package that is not installed ({err})") from None
    except ValueError as err:
        raise ConfigError(f"{name} {uri}: {err} (fsspec knows file://, memory://, s3://, gs://, ...)") from None


def in_temporary_job_dir(cwd: str | os.PathLike | None = None) -> bool:
    """Whether this process runs in a Ray job's uploaded working directory, which Ray deletes later."""
    return "runtime_resources/working_dir_files" in Path(cwd or os.getcwd()).resolve().as_posix()


class RunStorage:
    """The run directory `uri`, staged in the local folder `local`."""

    def __init__(self, uri: str, local: Path, name: str = "--output"):
        self.uri, self.local = uri.rstrip("/"), Path(local)
        self.fs, self.root = filesystem(self.uri, name)
        self.root = self.root.rstrip("/")
        self._sent: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime_ns) last uploaded

    @classmethod
    def staged(cls, uri: str, name: str = "--output") -> "RunStorage":
        """Storage for `uri` with a new local staging folder."""
        base = os.environ.get("MARL_STAGING_DIR") or None
        if base:
            Path(base).mkdir(parents=True, exist_ok=True)
        return cls(uri, Path(tempfile.mkdtemp(prefix="marl-run-", dir=base)), name)

    def exists(self, relative: str = "") -> bool:
        return self.fs.exists(f"{self.root}/{relative}".rstrip("/"))

    def download(self) -> None:
        """The run directory into staging (to resume it): its files, and its newest complete checkpoint."""
        for remote in self.fs.find(self.root):
            relative = remote[len(self.root):].lstrip("/")
            if relative.split("/")[0] in (CHECKPOINT, UPLOADING):
                continue
            self._get(remote, relative)
        if self.exists(f"{UPLOADING}/{MANIFEST}"):  # an upload that finished, but had not yet taken checkpoint/'s place
            self._get_tree(UPLOADING, CHECKPOINT)
        elif self.exists(f"{CHECKPOINT}/{MANIFEST}"):
            self._get_tree(CHECKPOINT, CHECKPOINT)
        self._sent = self._changed()  # what is here is what is there

    def _get(self, remote: str, relative: str) -> None:
        target = self.local / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        self.fs.get_file(remote, str(target))

    def _get_tree(self, remote_dir: str, local_dir: str) -> None:
        prefix = f"{self.root}/{remote_dir}"
        for remote in self.fs.find(prefix):
            self._get(remote, f"{local_dir}/{remote[len(prefix):].lstrip('/')}")

    def _changed(self) -> dict[str, tuple[int, int]]:
        files = {}
        for path in self.local.rglob("*"):
            if path.is_file() and not path.relative_to(self.local).parts[0].startswith("."):  # (a save's temporaries)
                stat = path.stat()
                files[path.relative_to(self.local).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        return files

    def sync(self) -> None:
        """Uploads the files that changed since the last sync; a new checkpoint goes up whole, then replaces the old."""
        now = self._changed()
        changed = {rel for rel, mark in now.items() if self._sent.get(rel) != mark}
        checkpoint = {rel for rel in now if rel.startswith(f"{CHECKPOINT}/")}
        self.fs.makedirs(self.root, exist_ok=True)
        for rel in sorted(changed - checkpoint):
            self._put(rel, rel)
        if changed & checkpoint:
            if self.exists(UPLOADING):
                self.fs.rm(f"{self.root}/{UPLOADING}", recursive=True)
            parts = sorted(checkpoint - {f"{CHECKPOINT}/{MANIFEST}"}) + [f"{CHECKPOINT}/{MANIFEST}"]  # manifest last
            for rel in parts:
                self._put(rel, UPLOADING + rel[len(CHECKPOINT):])
            if self.exists(CHECKPOINT):
                self.fs.rm(f"{self.root}/{CHECKPOINT}", recursive=True)
            self.fs.mv(f"{self.root}/{UPLOADING}", f"{self.root}/{CHECKPOINT}", recursive=True)
        self._sent = now

    def _put(self, local_rel: str, remote_rel: str) -> None:
        remote = f"{self.root}/{remote_rel}"
        self.fs.makedirs(remote.rsplit("/", 1)[0], exist_ok=True)
        self.fs.put_file(str(self.local / local_rel), remote)

    def remove_staging(self) -> None:
        shutil.rmtree(self.local, ignore_errors=True)
