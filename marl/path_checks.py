"""Paths a user gives, checked as a class before any work starts: one line naming the argument and the problem.

Every command's path arguments (`--output`, `--record`, `--resume`, `-o`, a scenario,
suite, checkpoint or run directory) and the config's path-valued keys (`offline.input`,
`offline.output`) go through these few checks, so a file where a folder is needed, a
missing input, an output nobody can write (under an existing *file*, in a read-only
folder) or an output inside the input it reads is refused the same way everywhere:

    marl: error: --output runs/x.py: is an existing file, not a folder (a run directory goes there)

Each check returns the path as a `Path`; nothing is created here (the caller does that
once every check has passed, so a refused command leaves nothing behind).
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from marl.errors import ConfigError


def _fail(name: str, value, problem: str) -> ConfigError:
    return ConfigError(f"{name} {value}: {problem}")


def input_file(value, name: str) -> Path:
    """A file to read: it exists and is a file."""
    path = Path(value)
    if path.is_dir():
        raise _fail(name, value, "is a folder, not a file")
    if not path.is_file():
        raise _fail(name, value, "does not exist" + _nearest_hint(path))
    return path


def input_dir(value, name: str, holds: str | None = None, what: str = "folder") -> Path:
    """A folder to read: it exists, is a folder and (with `holds`) has that file or folder in it."""
    path = Path(value)
    if path.is_file():
        raise _fail(name, value, f"is a file, not a {what}")
    if not path.is_dir():
        raise _fail(name, value, "does not exist" + _nearest_hint(path))
    if holds is not None and not (path / holds).exists():
        raise _fail(name, value, f"is not a {what} (it has no {holds})")
    return path


def _writable_parent(path: Path, name: str, value) -> None:
    """The nearest existing ancestor of `path` is a folder this process can write into."""
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise _fail(name, value, f"cannot be created: '{parent}' is a file, not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise _fail(name, value, f"cannot be created: folder '{parent}' is not writable")
            return


def output_dir(value, name: str, inside: tuple[tuple[str, object], ...] = (), what: str = "folder") -> Path:
    """A folder to write into: a new one that can be created, or an existing writable folder; not inside any
    of `inside` ((name, path) of inputs this command reads, which it must not write into)."""
    path = Path(value)
    if path.is_file():
        raise _fail(name, value, f"is an existing file, not a folder (a {what} goes there)")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise _fail(name, value, "is a folder that is not writable")
    else:
        _writable_parent(path, name, value)
    not_inside(path, name, value, inside)
    return path


def output_file(value, name: str, inside: tuple[tuple[str, object], ...] = ()) -> Path:
    """A file to write: not an existing folder; its folder exists or can be created, and is writable."""
    path = Path(value)
    if path.is_dir():
        raise _fail(name, value, "is an existing folder, not a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise _fail(name, value, "is a file that is not writable")
    _writable_parent(path, name, value)
    not_inside(path, name, value, inside)
    return path


def not_inside(path: Path, name: str, value, inputs: tuple[tuple[str, object], ...]) -> None:
    """`path` is neither one of the inputs nor inside one (writing there would change what is read)."""
    here = Path(path).resolve()
    for input_name, input_path in inputs:
        if input_path is None:
            continue
        source = Path(input_path).resolve()
        if here == source or source in here.parents:
            raise _fail(name, value, f"is inside {input_name} {input_path}, which this command reads: write elsewhere")


def input_pattern(value, name: str) -> list[Path]:
    """Offline input: a folder, a file, a glob, or a list of them; each must match something."""
    items = value if isinstance(value, (list, tuple)) else [value]
    found: list[Path] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise _fail(name, repr(value), f"must be a folder, a file, a glob or a list of them, got {type(item).__name__}")
        text = str(item)
        if glob.has_magic(text):
            matches = glob.glob(text, recursive=True)
            if not matches:
                raise _fail(name, text, "matches no file")
            found.extend(Path(m) for m in matches)
        elif Path(text).exists():
            found.append(Path(text))
        else:
            raise _fail(name, text, "does not exist" + _nearest_hint(Path(text)))
    return found


def _nearest_hint(path: Path) -> str:
    """' (no folder 'x' either)' / ' (a file 'x' is in the way)' for a missing path, to say how far it got."""
    for parent in path.absolute().parents:
        if parent.exists():
            if parent.is_file():
                return f" ('{parent}' is a file, not a folder)"
            return ""
    return ""
