"""Scenario files: an algorithm's config sections in YAML, loaded with OmegaConf.

    algo: PPO
    environment: {env: mpe2.simple_spread_v3, env_config: {N: 3}}
    training: {lr: 3e-4}

`imports: [my_envs]` names the user's modules (ones that call `marl.register_env`,
define a module class or a policy-mapping function): they are imported before
anything else is read, with the scenario's folder and the working directory on
sys.path, and recorded as `config.user_modules` (so config.yaml and checkpoints
name them, and Ray workers get them). `key=value` overrides (`training.lr=1e-4`) apply on top. The algorithm's
defaults are merged underneath first, so `${training.train_batch_size}` in a
workflow section resolves even when the file does not set it.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from marl.config.registry import config_class
from marl.config.sections import ConfigError
from marl.execution.user_code import check_module_names, import_user_modules
import difflib

TOP_LEVEL = ("algo", "name", "imports", "environment", "env_runners", "multi_agent", "training", "learners", "debugging", "evaluation", "stop", "checkpointing", "connectors", "loggers", "offline", "workflow", "psro")


def _check_top_level(data: dict, where: str) -> None:
    for key in data:
        if key not in TOP_LEVEL:
            near = difflib.get_close_matches(str(key), TOP_LEVEL, n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise ConfigError(f"{where}: unknown top-level key '{key}'{hint}; valid keys: {list(TOP_LEVEL)}")


def config_from_dict(data: dict, overrides: list[str] | None = None, where: str = "scenario", search_dirs=()):
    """An AlgorithmConfig from a plain scenario dict plus `key=value` overrides.

    Its `imports` are imported first (`search_dirs` also on sys.path), then set as `config.user_modules`."""
    try:
        raw = OmegaConf.create(data)
        for item in overrides or []:
            if "=" not in item:
                raise ConfigError(f"override '{item}' must look like key=value, e.g. training.lr=1e-4")
        for item in overrides or []:  # one at a time: a value of another kind than the scenario's is named
            try:
                raw = OmegaConf.merge(raw, OmegaConf.from_dotlist([item]))
            except TypeError:  # (OmegaConf cannot merge a list into a mapping, or the other way)
                raise ConfigError(f"override '{item}': a list or mapping where the scenario holds the other kind; "
                                  "give the key's whole value in the scenario's kind") from None
        plain_top = OmegaConf.to_container(raw, resolve=False)
        if not isinstance(plain_top, dict):
            raise ConfigError(f"{where}: a scenario must be a mapping of sections, got {type(plain_top).__name__}")
        _check_top_level(plain_top, where)
        if "imports" in plain_top:
            imports = check_module_names(plain_top.pop("imports"), where)
            raw = OmegaConf.create(plain_top)  # the sections only: imports are no section to merge with defaults
        else:
            imports = []
        import_user_modules(imports, f"{where}: imports: {{module}}", search_dirs)
        if "algo" not in plain_top:
            raise ConfigError(f"{where}: 'algo' is required (one of the algorithm names, e.g. algo: PPO)")
        cls = config_class(plain_top["algo"])
        defaults = cls().to_dict()
        defaults.pop("workflow")
        # A mapping or list value in the file (model, env_config, policies, ...) replaces the default
        # outright, as the builder does (and a list never meets a mapping default in the merge); only
        # sections themselves merge key by key.
        for section, values in plain_top.items():
            if isinstance(defaults.get(section), dict) and not isinstance(values, dict) and values is not None:
                raise ConfigError(f"{where}: '{section}' must be a mapping of its keys, got {type(values).__name__} {values!r}")
            if isinstance(values, dict) and isinstance(defaults.get(section), dict):
                for key, value in values.items():
                    if isinstance(value, (dict, list)):
                        defaults[section].pop(key, None)
        merged = OmegaConf.merge(OmegaConf.create(defaults), raw)
        resolved = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{where}: {err}".splitlines()[0]) from None
    config = cls()
    resolved.pop("algo")
    resolved.pop("name", None)
    config.user_modules = imports
    return config.update_from_dict(resolved)


def load_scenario(path: str | Path, overrides: list[str] | None = None):
    """An AlgorithmConfig from a scenario YAML file plus `key=value` overrides."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"scenario file '{path}' does not exist")
    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as err:  # YAML syntax errors come in several types
        raise ConfigError(f"scenario file '{path}' is not valid YAML: {err}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"scenario file '{path}' must hold a mapping of sections")
    return config_from_dict(data, overrides, where=str(path), search_dirs=[path.parent])
