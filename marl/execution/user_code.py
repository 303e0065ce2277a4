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

`import_user_modules` is the one way every command and loader imports them:
`--import` on the command line, a scenario's or suite's `imports:` key, and
the `imports` a run's config.yaml and checkpoint manifest record (so
`--resume`, `marl evaluate`, `Algorithm.from_checkpoint`, `load_module` and
Tune trials import again what training imported).
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import traceback
from pathlib import Path

from marl.errors import ConfigError

_INSTALLED = {Path(p).resolve() for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sys.prefix, sys.base_prefix}}


def check_module_names(value, where: str) -> list[str]:
    """An `imports:` value: a list of module names (None: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, str) and m.strip() for m in value):
        raise ConfigError(f"{where}: 'imports' must be a list of module names (imports: [my_envs]), got {value!r}")
    return [m.strip() for m in value]


def import_user_modules(names, label: str = "--import {module}", search_dirs=()) -> list[str]:
    """Imports the user's modules (ones that call marl.register_env or define classes a config names); returns them.

    The working directory and `search_dirs` (a scenario's folder, say) go on sys.path first, as `python -m`
    finds a module next to the user. `label` names where a module was asked for ('{module}' is replaced),
    so that a failure is one line: a module that cannot be found (with the two ways to make it found) or one
    whose own code raised (where)."""
    names = list(dict.fromkeys(names))
    if names:
        for folder in [os.getcwd(), *(str(Path(d).resolve()) for d in search_dirs)]:
            if folder not in sys.path and not (folder == os.getcwd() and "" in sys.path):
                sys.path.insert(0, folder)
    for module in names:
        where = label.format(module=module)
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name and (module == err.name or module.startswith(err.name + ".")):
                raise ConfigError(
                    f"{where}: no module named '{err.name}' here: pass --import with a module this Python can find, "
                    f"or put the folder that holds it on PYTHONPATH (working directory: {os.getcwd()})"
                ) from None
            raise ConfigError(f"{where}: importing it raised ModuleNotFoundError: {err} (a module it imports is missing)") from None
        except Exception as err:  # the user's code failed as it was imported: say where, in one line
            frame = traceback.extract_tb(err.__traceback__)[-1]
            raise ConfigError(
                f"{where}: importing it raised {type(err).__name__}: {err} ({frame.filename}:{frame.lineno})"
            ) from None
    return names


def add_import_option(parser) -> None:
    """`--import MODULE` (argparse), the same on every command that builds an env or a module."""
    parser.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="import MODULE first (one that calls marl.register_env or defines a class the scenario names); "
             "repeatable; recorded in config.yaml and checkpoints, so later commands import it again",
    )


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


def module_folders(names) -> list[str]:
    """The folders from which the (imported) modules `names` were imported: put on sys.path elsewhere (a Tune
    trial's process), they are found there too."""
    folders = []
    for name in names:
        path = _top_level_path(name)
        if path is not None and not _installed(path) and str(path.parent) not in folders:
            folders.append(str(path.parent))
    return folders


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
