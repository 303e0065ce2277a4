"""The user's code, shipped to Ray workers the Ray way: a runtime environment's `py_modules`.

A user's module that registers an env (`marl train --import MODULE`,
`AlgorithmConfig.user_modules`) or defines the env creator, a policy-mapping
function or a module class is imported by the driver; Ray's worker processes
do not see the driver's `sys.path`, so unpickling the config in an env runner
or learner actor would fail with ModuleNotFoundError. Every such module that
is not installed (not under the interpreter's prefix) is named in the job's
`runtime_env={"py_modules": [...]}` when marl starts or joins Ray (`ray.init`;
Ray uploads local modules only at the job level): Ray uploads the file, or the
top-level package's directory, once per content hash and puts it on each
worker's path. When Ray was started by the caller (a notebook, a test), the
actors get the modules' directories on PYTHONPATH instead (`env_vars`: valid
for workers on this machine). A worker that still cannot import it is
reported by `import_hint`.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from marl.errors import ConfigError

_INSTALLED = {Path(p).resolve() for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sys.prefix, sys.base_prefix}}


def _installed(path: Path) -> bool:
    return any(root == path or root in path.parents for root in _INSTALLED)


def _top_level_path(name: str) -> Path | None:
    """The file of a top-level module or the directory of a top-level package (None: built-in or not found)."""
    top = sys.modules.get(name.split(".")[0])
    file = getattr(top, "__file__", None)
    if file is None:
        return None
    path = Path(file).resolve()
    return path.parent if path.name == "__init__.py" else path


def shipped_modules(config) -> list[str]:
    """Local paths of the user's modules the actors need (none when all are installed or part of marl)."""
    names = list(getattr(config, "user_modules", []) or [])
    creator = getattr(config, "env_creator", None)
    if creator is not None:
        names.append(getattr(creator, "__module__", "") or "")
    paths = []
    for name in names:
        if not name or name == "__main__" or name.split(".")[0] == "marl":
            continue  # __main__ is pickled by value; marl itself is installed on every worker
        path = _top_level_path(name)
        if path is not None and not _installed(path) and str(path) not in paths:
            paths.append(str(path))
    return paths


_JOB_SHIPPED: set[str] = set()  # modules this process's `ray.init` shipped at the job level


def job_runtime_env(config) -> dict | None:
    """`runtime_env` for the `ray.init` marl makes; remembers what it ships."""
    paths = shipped_modules(config)
    if not paths:
        return None
    _JOB_SHIPPED.clear()
    _JOB_SHIPPED.update(paths)
    return {"py_modules": paths}


def actor_options(config) -> dict:
    """Keyword options for `ray.remote(...)` of an actor that unpickles `config`: none when the job ships the
    user's modules; else their directories on the workers' PYTHONPATH (workers on this machine)."""
    missing = [p for p in shipped_modules(config) if p not in _JOB_SHIPPED]
    if not missing:
        return {}
    dirs = list(dict.fromkeys(str(Path(p).parent) for p in missing))
    existing = os.environ.get("PYTHONPATH")
    return {"runtime_env": {"env_vars": {"PYTHONPATH": os.pathsep.join(dirs + ([existing] if existing else []))}}}


def import_hint(err: BaseException, what: str) -> ConfigError | None:
    """A one-line ConfigError when an actor died because it could not import the user's code, else None."""
    text = str(err)
    marker = "No module named "
    if marker not in text:
        return None
    module = text.split(marker, 1)[1].split()[0].strip("'\"")
    return ConfigError(
        f"{what} could not import module '{module}'. marl ships the modules named with --import (and the module of a "
        f"registered env creator) to Ray workers through runtime_env py_modules; a module they import in turn must be "
        f"importable there too: install it on every node (pip install -e .), or name it with another --import"
        + (f" (PYTHONPATH={os.environ['PYTHONPATH']} on the driver is not seen by workers)" if os.environ.get("PYTHONPATH") else "")
    )
