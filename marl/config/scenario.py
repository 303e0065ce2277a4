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
workflow section resolves even when the file does not set it; `${mul:a,b,...}` and `${div:a,b}` compute.
A file with a `defaults:` list of config groups is composed by `marl.config.compose` (`load_scenario`).
"""

from __future__ import annotations

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from marl.config.registry import config_class, discovered
from marl.errors import ConfigError
from marl.execution.user_code import check_module_names, import_user_modules
import difflib
import math

# Arithmetic in interpolations, so a conf file can size a batch from other keys:
#   train_batch_size: ${mul:${env_runners.num_envs_per_env_runner},${env_runners.rollout_fragment_length},${environment.env_config.n_agents}}
_register = getattr(OmegaConf, "register_resolver", None) or OmegaConf.register_new_resolver  # (2.4's name; 2.3's)
_register("mul", lambda *factors: math.prod(factors), replace=True)
_register("div", lambda a, b: max(1, int(a) // int(b)), replace=True)  # whole rows, at least one

TOP_LEVEL = ("algo", "name", "imports", "environment", "env_runners", "multi_agent", "training", "learners", "debugging", "evaluation", "stop", "checkpointing", "connectors", "loggers", "offline", "workflow", "psro")


def _check_top_level(data: dict, where: str, origin_of) -> None:
    for key in data:
        if key not in TOP_LEVEL:
            near = difflib.get_close_matches(str(key), TOP_LEVEL, n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise ConfigError(f"{origin_of(str(key)) or where}: unknown top-level key '{key}'{hint}; "
                              f"valid keys: {list(TOP_LEVEL)}", key=str(key))


def config_from_dict(data: dict, overrides: list[str] | None = None, where: str = "scenario", search_dirs=(),
                     origin_of=lambda key: None):
    """An AlgorithmConfig from a plain scenario dict plus `key=value` overrides.

    Its `imports` are imported first (`search_dirs` also on sys.path), then set as `config.user_modules`.
    `origin_of(dotted_key)`: where a key was set (`marl.config.compose`), named by the errors found here."""
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
        _check_top_level(plain_top, where, origin_of)
        if "imports" in plain_top:
            imports = check_module_names(plain_top.pop("imports"), where)
            raw = OmegaConf.create(plain_top)  # the sections only: imports are no section to merge with defaults
        else:
            imports = []
        import_user_modules(imports, f"{where}: imports: {{module}}", search_dirs)
        if "algo" not in plain_top:
            raise ConfigError(f"{where}: 'algo' is required (algorithm=NAME, --algo NAME, or algo: NAME in the scenario; "
                              f"one of {[n.lower() for n in discovered()]})")
        try:
            cls = config_class(plain_top["algo"])
        except ConfigError as err:
            raise ConfigError(str(err), key="algo") from None
        defaults = cls().to_dict()
        defaults.pop("workflow")
        # A mapping or list value in the file (model, env_config, policies, ...) replaces the default
        # outright, as the builder does (and a list never meets a mapping default in the merge); only
        # sections themselves merge key by key.
        for section, values in plain_top.items():
            if isinstance(defaults.get(section), dict) and not isinstance(values, dict) and values is not None:
                raise ConfigError(f"{origin_of(section) or where}: '{section}' must be a mapping of its keys, got "
                                  f"{type(values).__name__} {values!r}", key=section)
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
