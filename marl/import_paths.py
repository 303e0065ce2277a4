"""Import paths: the object a string such as 'pkg.mod:Name' names (module classes, mapping functions,
connector pieces and config classes kept outside marl)."""

from __future__ import annotations

import importlib


def import_object(path: str):
    """The object an import path names: 'pkg.mod:Name' or 'pkg.mod.Name'."""
    mod_name, _, attr = path.replace(":", ".").rpartition(".")
    return getattr(importlib.import_module(mod_name), attr)
