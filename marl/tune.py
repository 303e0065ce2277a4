"""Ray Tune: an algorithm as a Tune trainable, so `tune.Tuner` can sweep a scenario's hyperparameters.

    from ray import tune
    from marl.tune import trainable

    tuner = tune.Tuner(
        trainable("scenarios/cartpole_ppo.yaml"),
        param_space={"training.lr": tune.grid_search([1e-3, 3e-4])},
        run_config=tune.RunConfig(stop={"training_iteration": 20}),
    )
    results = tuner.fit()

`trainable(base)` takes a scenario file, a scenario dict or an AlgorithmConfig;
each trial's config holds overrides on top of it, as dotted keys
(`"training.lr"`) or nested sections (`{"training": {"lr": ...}}`). One Tune
iteration is one `Algorithm.train()`; a trial also ends when the scenario's
own `stop` criteria are met. Checkpoints are `Algorithm.save` directories.
The base's `imports` (a scenario's `imports:` key, `config.user_modules`) are
imported in every trial, from the folders the driver imported them from.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from ray import tune

from marl.algorithms.algorithm_config import AlgorithmConfig
from marl.config.compose import Layer, compose
from marl.config.scenario import config_from_dict
from marl.errors import ConfigError
from marl.execution.user_code import import_user_modules, module_folders
import torch

CHECKPOINT_NAME = "marl_checkpoint"


def _nest(overrides: dict) -> dict:
    """{'training.lr': x, 'stop': {...}} -> {'training': {'lr': x}, 'stop': {...}}."""
    out: dict = {}
    for key, value in overrides.items():
        parts = str(key).split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"tune config key '{key}' sets inside '{part}', which is not a section")
        if isinstance(value, dict) and isinstance(node.get(parts[-1]), dict):
            node[parts[-1]].update(value)
        else:
            node[parts[-1]] = value
    return out


def _merge(base: dict, extra: dict) -> dict:
    """Section-wise merge: a section in `extra` updates the base's keys; other values replace."""
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "workflow":
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def resolve_config(base, overrides: dict):
    """The AlgorithmConfig of one trial: `base` (path, dict or AlgorithmConfig) plus `overrides`."""
    nested = _nest(overrides)
    if isinstance(base, AlgorithmConfig):
        config = base.copy()
        if "algo" in nested and str(nested.pop("algo")).upper() != config.algo_name:
            raise ConfigError(f"a trial cannot change 'algo' of a {config.algo_name} config")
        return config.update_from_dict(nested)
    if isinstance(base, (str, os.PathLike)):
        composition = compose(base)  # the scenario with its `defaults:` groups, then the trial's keys on top
        composition.merge(Layer("tune trial", nested, {}))
        return composition.config()
    if isinstance(base, dict):
        return config_from_dict(_merge(base, nested), where="tune base scenario")
    raise ConfigError(f"trainable() takes a scenario path, a scenario dict or an AlgorithmConfig, got {type(base).__name__}")


class MarlTrainable(tune.Trainable):
    """One trial: an Algorithm built from `base_scenario` plus the trial's config (overrides)."""

    base_scenario = None  # set by `trainable()`; None: the trial's config is a whole scenario dict
    user_modules: tuple = ()  # the base's imports and the folders the driver found them in (set by `trainable()`)
    user_module_folders: tuple = ()

    @classmethod
    def default_resource_request(cls, config):
        """The driver's CPU plus one bundle per env runner and learner actor, so Tune reserves them."""
        from ray.tune.execution.placement_groups import PlacementGroupFactory

        cfg = resolve_config(cls.base_scenario or {}, dict(config))
        bundles = [{"CPU": 1.0}]
        bundles += [{"CPU": cfg.env_runners_cfg.num_cpus_per_env_runner}] * cfg.env_runners_cfg.num_env_runners
        bundles += [{"CPU": cfg.learners_cfg.num_cpus_per_learner}] * cfg.learners_cfg.num_learners
        return PlacementGroupFactory(bundles)

    def setup(self, config):
        torch.set_num_threads(1)  # trials share the machine's cores
        import_user_modules(self.user_modules, "tune trial: imports: {module}", self.user_module_folders)
        self.algo = resolve_config(self.base_scenario or {}, dict(config)).build()

    def step(self):
        result = self.algo.train()
        result["done"] = self.algo.stop_reason(result) is not None
        return result

    def save_checkpoint(self, checkpoint_dir):
        self.algo.save(Path(checkpoint_dir) / CHECKPOINT_NAME)

    def load_checkpoint(self, checkpoint):
        self.algo.restore(Path(checkpoint) / CHECKPOINT_NAME)

    def cleanup(self):
        self.algo.stop()


def trainable(base) -> type[MarlTrainable]:
    """A Tune trainable class for `base`: a scenario file, a scenario dict or an AlgorithmConfig.

    The base is checked here, so a bad scenario fails before Tune starts any trial.
    """
    if isinstance(base, (str, os.PathLike)):
        base = str(Path(base).resolve())  # trials run in their own working directories
    imports = tuple(resolve_config(base, {}).user_modules)
    name = f"Marl_{Path(base).stem if isinstance(base, str) else getattr(base, 'algo_name', 'scenario')}"
    return type(name, (MarlTrainable,), {"base_scenario": base, "user_modules": imports,
                                         "user_module_folders": tuple(module_folders(imports))})
