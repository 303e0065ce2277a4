"""Old import paths of modules that moved (kept for a release, so user code, tools and saved references that
name them keep working): importing an old name gives the module at its new place, the same object."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "marl.algorithms.sections": "marl.config.sections",
    "marl.algorithms.scenario": "marl.config.scenario",
    "marl.algorithms.registry": "marl.config.registry",
    "marl.algorithms.checkpoint": "marl.checkpoint.directory",
    "marl.algorithms.state_files": "marl.checkpoint.state_files",
    "marl.algorithms.algorithm": "marl.runtime.algorithm",
    "marl.algorithms.evaluation": "marl.runtime.evaluation",
    "marl.algorithms.resources": "marl.runtime.resources",
    "marl.run": "marl.runtime.run_loop",
    "marl.serve_command": "marl.cli.serve",
    "marl.experiment.commands": "marl.cli.experiment",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import system sets __spec__ to the old name's: put it back
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state  # executed already, at its new place


def install() -> None:
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())  # before an editable install's finder, which may know the old file
