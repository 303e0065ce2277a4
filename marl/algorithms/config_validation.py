"""The checks of a whole config, once every key is set: `AlgorithmConfig.validate` and the evaluation runners'
config (`evaluation.evaluation_config` applied, every key checked).

`AlgorithmConfig` inherits these methods. They are their own module because checking the whole config,
across sections and against this machine (paths, GPUs, recurrent support, connector pieces) and against the
algorithm's `capabilities` (`marl.config.capabilities`), is a job
apart from building it (`marl.algorithms.algorithm_config`): they read the config through its public
questions (`policy_specs`, `plan_for`, `seated_pool`) and the sections, and change
nothing but the copy `evaluation_runner_config` returns.
"""

from __future__ import annotations

import difflib
import os
from typing import Self

from marl import path_checks
from marl.config.capabilities import check_config, check_recurrent
from marl.config.checks import check_relations, update_section
from marl.config.sections import SECTION_NAMES
from marl.connectors.build import check_policies
from marl.envs.wrappers import parse_wrappers
from marl.errors import ConfigError, unknown_key
from marl.learners.device import check_gpus_available
from marl.modules.build import model_keys
from marl.runners.fragments import fragment_length
from marl.modules.recurrent import RECURRENT_KEYS, check_recurrent_support, recurrent_options

EVALUATION_OVERRIDE_SECTIONS = ("environment", "env_runners")


class ConfigValidation:
    """`validate` and `evaluation_runner_config` of `AlgorithmConfig` (mixed in)."""

    def validate(self) -> None:
        for name in SECTION_NAMES:  # keys bounded by other keys, now that every key is set
            check_relations(getattr(self, name + "_cfg"), name)
        self._check_paths()
        check_config(self)  # what the algorithm's record refuses (overlap); its action spaces: once the env is made
        if not self.environment_cfg.env:
            raise ConfigError("'environment.env' is required: a Gymnasium id, a PettingZoo module path or a registered name")
        if self.environment_cfg.wrappers:
            parse_wrappers(self.environment_cfg.wrappers)  # unknown wrapper or argument: one line, before any env is made
        ids = list(self.policy_specs())
        if self.multi_agent_cfg.policies_to_train is not None:
            for pid in self.multi_agent_cfg.policies_to_train:
                if pid not in ids:
                    raise ConfigError(f"'multi_agent.policies_to_train' names unknown policy '{pid}'; declared: {ids}")

        for pid, spec in self.policy_specs().items():  # recurrent, cell_size, max_seq_len: range-checked here
            where = f"multi_agent.policies.{pid}.model" if RECURRENT_KEYS & set(spec.model) else "training.model"
            plan = self.plan_for(pid)
            _check_model_keys(plan, spec, pid)
            kind, _, _ = recurrent_options(plan.model, where)
            if kind is not None:
                check_recurrent(self, pid, where, kind)  # the algorithm trains stateful modules at all
                check_recurrent_support(plan.module_class, f"'{where}.recurrent: {kind}'")  # and this module class has a core
        check_policies(self)
        if self.learners_cfg.num_learners == 0:  # an in-process learner uses this process's GPU (actors: LearnerGroup)

            check_gpus_available(self.learners_cfg.num_gpus_per_learner)
        if self.env_runners_cfg.overlap and self.env_runners_cfg.num_env_runners == 0:
            raise ConfigError(
                "'env_runners.overlap' samples on runner actors beside the learner: set 'env_runners.num_env_runners' "
                ">= 1 (1: one sampling process), or overlap=false to sample in-process"
            )
        ev = self.evaluation_cfg
        if ev.evaluation_parallel_to_training and ev.evaluation_num_env_runners == 0:
            raise ConfigError(
                "'evaluation.evaluation_parallel_to_training' needs remote evaluation runners: "
                "set 'evaluation.evaluation_num_env_runners' >= 1 (0 evaluates in-process, between iterations)"
            )
        self.evaluation_runner_config()  # names any bad key of evaluation.evaluation_config now, not at the first evaluation

    def batch_notes(self) -> list[str]:
        """What the user should know of how the config's sizes combine (printed by `marl train` before it starts):
        a train batch smaller than one sampling round is rounded up to the round, and the line names the value used."""
        if not self.batch_in_agent_steps or self.env_runners_cfg.overlap:
            return []
        run, batch = self.env_runners_cfg, self.training_cfg.train_batch_size
        runners = max(1, run.num_env_runners)
        round_steps = runners * run.num_envs_per_env_runner * fragment_length(self, 1)  # rows: at least one per env step
        if batch >= round_steps:
            return []
        return [f"'training.train_batch_size' {batch} is below one sampling round ({runners} runner(s) x "
                f"{run.num_envs_per_env_runner} envs x {run.rollout_fragment_length} steps): each update trains on at "
                f"least {round_steps} agent steps; for {batch}, lower env_runners.num_envs_per_env_runner or "
                "rollout_fragment_length"]

    def _check_paths(self) -> None:
        """The path-valued keys, as `marl.path_checks` checks every path a user gives: inputs exist, outputs can be
        written and are not inside the inputs."""
        off = self.offline_cfg
        inputs = []
        if off.input and isinstance(off.input, (str, os.PathLike, list, tuple)):
            inputs = path_checks.input_pattern(off.input, "offline.input")
        if off.output:
            path_checks.output_dir(off.output, "offline.output",
                                   inside=tuple(("offline.input", p) for p in inputs if p.is_dir()))

    def evaluation_runner_config(self) -> Self:  # an AlgorithmConfig of the same class
        """The config of the evaluation runners: this one with `evaluation.evaluation_config` applied.

        `evaluation_config` holds section overrides ({environment: {...}, env_runners: {...}});
        `environment.env_config` merges key by key into the training env_config.
        """

        ev = self.evaluation_cfg
        cfg = self.copy()
        for name, values in (ev.evaluation_config or {}).items():
            where = f"evaluation.evaluation_config.{name}"
            if name not in EVALUATION_OVERRIDE_SECTIONS:
                near = difflib.get_close_matches(str(name), EVALUATION_OVERRIDE_SECTIONS, n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise ConfigError(
                    f"unknown section '{where}'{hint}; evaluation_config may override {list(EVALUATION_OVERRIDE_SECTIONS)}"
                )
            if not isinstance(values, dict):
                raise ConfigError(f"'{where}' must be a mapping of keys to values, got {type(values).__name__}")
            values = dict(values)
            if name == "env_runners" and "num_env_runners" in values:
                raise ConfigError(f"'{where}.num_env_runners' is not used: set 'evaluation.evaluation_num_env_runners'")
            if name == "environment" and isinstance(values.get("env_config"), dict):
                values["env_config"] = {**cfg.environment_cfg.env_config, **values["env_config"]}
            update_section(getattr(cfg, name + "_cfg"), where, values)  # errors name 'evaluation.evaluation_config.<section>.<key>'
        cfg.env_runners_cfg.num_env_runners = ev.evaluation_num_env_runners
        sp = cfg.seated_pool()
        if sp is not None and sp.evaluation_opponent is not None:  # self-play judged against a fixed yardstick
            ma = cfg.multi_agent_cfg
            ma.policies = sp.evaluation_policies(dict(ma.policies or {}))
            ma.policy_mapping = sp.evaluation_mapping
        return cfg


def _check_model_keys(plan, spec, pid: str) -> None:
    """Each model option against the options the policy's module reads (its class's MODEL_KEYS), with the nearest."""
    allowed = model_keys(plan.module_class, plan.model)
    if allowed is None:
        return
    for key in plan.model:
        if key not in allowed:
            where = f"multi_agent.policies.{pid}.model" if key in spec.model else "training.model"
            name = plan.module_class if isinstance(plan.module_class, str) else getattr(plan.module_class, "__name__", "ActorCriticMLP")
            raise unknown_key(f"{where}.{key}", allowed, f"policy '{pid}': {name} reads")
