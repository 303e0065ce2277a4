"""AlgorithmConfig: the typed builder every algorithm's config extends.

    PPOConfig().environment("mpe2.simple_spread_v3", env_config={"N": 3})
               .env_runners(num_env_runners=2).training(lr=3e-4).build()

A scenario file holds the same sections (see `marl.config.scenario`).
Each section is a dataclass in `sections.py`; the algorithm adds its own
`training` section and names its loss, learner connectors and default workflow.
What an algorithm gives the learner is `AlgorithmParts` (`algorithm_parts.py`); the checks of a
whole config are `ConfigValidation` (`config_validation.py`), which `AlgorithmConfig` inherits.
Both stay importable from here. What one policy needs of its algorithm is one answer,
`plan_for(policy_id)` -> `PolicyPlan` (`marl.config.policy_plan`); a folder changes it in `_plan`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from typing import Any, Callable


from marl.algorithms.algorithm_parts import AlgorithmParts
from marl.algorithms.env_spec import EnvSpec, default_groups, resolve_env_choices, resolve_env_spec
from marl.algorithms.config_validation import ConfigValidation
from marl.config.capabilities import UNDECLARED, Capabilities
from marl.config.checks import AUTO
from marl.config.plain_data import plain_data as _plain
from marl.config.policy_plan import PolicyPlan
from marl.config.psro_section import PSROSection
from marl.config.registry import NamedConfig, algo_reference
from marl.config.sections import SECTION_NAMES, CheckpointingSection, ConnectorsSection, DebuggingSection, EnvironmentSection, EnvRunnersSection, EvaluationSection, LearnersSection, LoggersSection, MultiAgentSection, OfflineSection, StopSection
from marl.errors import ConfigError
from marl.config.checks import section_fields, update_section
from marl.connectors.build import check_section
from marl.data import sample_batch as sb
from marl.envs.registry import registered_creator
from marl.modules.build import model_keys
from marl.policies.groups import group_mapping
from marl.policies import DEFAULT_POLICY_ID, MappingError, PolicyMapping, PolicySpec
from marl.policies.league import League, LeagueMapping
from marl.policies.self_play import SelfPlay
from marl.runtime.algorithm import Algorithm

__all__ = ["SECTION_NAMES", "AlgorithmConfig", "AlgorithmParts"]  # the parts and the section names live in their own modules

RECORDED_COLUMNS = frozenset({sb.ACTION_LOGP, sb.NEXT_OBS, sb.NEXT_ACTION_MASK})  # what recording (`offline.output`) keeps
# Reads of the plan: an override would be bypassed by every caller that reads the plan, so it is refused.
PLAN_READS = ("plan_for", "runner_columns")


class AlgorithmConfig(ConfigValidation, NamedConfig):  # validate(), evaluation_runner_config()
    algo_name = "?"  # `algo:` in scenarios, upper case; "?": a shared base, not an algorithm (see registry.py)
    training_section_cls: type = object
    default_module_class: type | str | None = None  # None: ActorCriticMLP
    # The columns runners record beyond obs/actions/rewards/flags (names from `marl.data.sample_batch`,
    # see `marl.runners.collector.REQUESTABLE`); runners compute nothing else.
    sample_columns: frozenset[str] = frozenset()
    # What it can train (action spaces, recurrent, overlap, MIXED family, ...: marl.config.capabilities), declared
    # once by each algorithm folder's class (tests/test_registry.py); a class kept outside marl that declares
    # none has nothing refused at this level.
    capabilities: Capabilities = UNDECLARED
    # Where this algorithm's defaults must learn (`marl.algorithms.canonical.CanonicalTask`s): each algorithm
    # declares its own on its class; tests/test_defaults_learn.py fails an algorithm whose class declares none.
    canonical_tasks: tuple = ()
    # True: `training.train_batch_size` counts agent steps (rows of all policies) and runners shorten their
    # fragments for many agents (`marl.runners.fragments`); False: the algorithm's own unit (DQN: replayed rows).
    batch_in_agent_steps = False
    # Training keys handed to the policy's model where it runs a module the algorithm picks (its `module_class_for`
    # with no class named), the module reads the key (its MODEL_KEYS) and the policy's model does not set it (PPO's
    # popart, DQN's dueling and epsilon, SAC's twin_q and initial_alpha): declared here, applied by the base `_plan`
    # alone; no folder copies a training key into a model (tests/test_model_options.py).
    model_options: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        overridden = [name for name in PLAN_READS if name in vars(cls)]
        if overridden:
            raise TypeError(f"{cls.__qualname__} overrides {overridden}, which read the policy's plan: "
                            "override _plan(policy_id) instead (marl.config.policy_plan)")
        if "mixed_family" in vars(cls):  # the attribute records replaced: say where it went, not ignore it
            raise TypeError(f"{cls.__qualname__} declares mixed_family: declare capabilities = Capabilities(..., "
                            f"mixed_family={vars(cls)['mixed_family']!r}, ...) instead (marl.config.capabilities)")

    def __init__(self):
        self.environment_cfg = EnvironmentSection()
        self.env_runners_cfg = EnvRunnersSection()
        self.multi_agent_cfg = MultiAgentSection()
        self.training_cfg = self.training_section_cls()
        self.learners_cfg = LearnersSection()
        self.debugging_cfg = DebuggingSection()
        self.evaluation_cfg = EvaluationSection()
        self.stop_cfg = StopSection()
        self.checkpointing_cfg = CheckpointingSection()
        self.connectors_cfg = ConnectorsSection()
        self.loggers_cfg = LoggersSection()
        self.offline_cfg = OfflineSection()
        self.psro_cfg: PSROSection | None = None  # a PSRO run around this algorithm (`psro:`), or none
        self.workflow: dict | Any | None = None  # a Workflow, its YAML dict form, or None (default)
        self.env_creator = None  # the registered creator, shipped with the config to runner processes
        # Modules of the user's code (`marl train --import`) that Ray actors import: shipped to them through
        # runtime_env py_modules (marl.execution.user_code), so workers need no PYTHONPATH.
        self.user_modules: list[str] = []
        self._env_spec: EnvSpec | None = None  # resolved once per env (see env_spec), shipped with the config

    # -- builder --------------------------------------------------------------
    def _set(self, name: str, values: dict) -> "AlgorithmConfig":
        section = getattr(self, name + "_cfg")
        if name == "connectors":  # pieces are checked (built once) as they are set, all or nothing

            trial = copy.deepcopy(section)
            update_section(trial, name, values)
            check_section(trial)
            self.connectors_cfg = trial
            return self
        update_section(section, name, {k: v for k, v in values.items()})
        return self

    def environment(self, env: str | None = None, *, env_config: dict | None = None, **kw) -> "AlgorithmConfig":
        values = dict(kw)
        if env is not None:
            values["env"] = env
        if env_config is not None:
            values["env_config"] = env_config
        return self._set("environment", values)

    def env_runners(self, **kw) -> "AlgorithmConfig":
        return self._set("env_runners", kw)

    def multi_agent(
        self,
        *,
        policies: dict | list | None = None,
        policy_mapping_fn: Callable | dict | None = None,
        policies_to_train: list | None = None,
        **kw,
    ) -> "AlgorithmConfig":
        values = dict(kw)
        if policies is not None:
            values["policies"] = {p: None for p in policies} if isinstance(policies, (list, tuple, set)) else policies
        if policy_mapping_fn is not None:
            values["policy_mapping"] = policy_mapping_fn
        if policies_to_train is not None:
            values["policies_to_train"] = list(policies_to_train)
        return self._set("multi_agent", values)

    def training(self, **kw) -> "AlgorithmConfig":
        return self._set("training", kw)

    def learners(self, **kw) -> "AlgorithmConfig":
        return self._set("learners", kw)

    def debugging(self, **kw) -> "AlgorithmConfig":
        return self._set("debugging", kw)

    def evaluation(self, **kw) -> "AlgorithmConfig":
        return self._set("evaluation", kw)

    def stopping(self, **kw) -> "AlgorithmConfig":
        return self._set("stop", kw)

    def checkpointing(self, **kw) -> "AlgorithmConfig":
        return self._set("checkpointing", kw)

    def connectors(self, **kw) -> "AlgorithmConfig":
        """Connector pipelines: env_to_module=[...], module_to_env=[...], learner=[...], policies={pid: {...}};
        each entry a piece name, {name: ..., **settings}, a ConnectorPiece class or object (see marl.connectors.build)."""
        return self._set("connectors", kw)

    def loggers(self, **kw) -> "AlgorithmConfig":
        """Where a run's metrics go besides result.jsonl: tensorboard, csv, mlflow, wandb (see `LoggersSection`)."""
        return self._set("loggers", kw)
    def offline_data(self, **kw) -> "AlgorithmConfig":
        """Recording (output=DIR) and offline input (input=DIR | glob | list) for BC, MARWIL, CQL."""
        return self._set("offline", kw)

    def psro(self, **kw) -> "AlgorithmConfig":
        """Makes this a PSRO run (`marl.config.psro_section.PSROSection`): meta_solver, epochs, iterations_per_epoch, ..."""
        section = copy.deepcopy(self.psro_cfg) if self.psro_cfg is not None else PSROSection()
        update_section(section, "psro", kw)  # all or nothing: a bad key leaves the config as it was
        self.psro_cfg = section
        return self

    def with_workflow(self, workflow) -> "AlgorithmConfig":
        """A custom workflow (a `Workflow` or its YAML dict form) instead of the algorithm's default."""
        self.workflow = workflow
        return self

    def update_from_dict(self, data: dict) -> "AlgorithmConfig":
        allowed = set(SECTION_NAMES) | {"workflow", "psro"}
        for name, values in data.items():
            if name not in allowed:
                near = difflib.get_close_matches(name, sorted(allowed), n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise ConfigError(f"unknown section '{name}'{hint}; valid sections: {sorted(allowed)}")
            if name == "workflow":
                self.workflow = values
                continue
            if values is None:
                continue
            if not isinstance(values, dict):
                raise ConfigError(f"section '{name}' must be a mapping of keys to values, got {type(values).__name__}")
            if name == "psro":
                self.psro(**values)
                continue
            self._set(name, values)
        return self

    def copy(self) -> "AlgorithmConfig":
        return copy.deepcopy(self)

    def to_dict(self) -> dict:
        """Plain-data form (what `config.yaml` of a run holds); callables become their names."""

        out: dict[str, Any] = {"algo": algo_reference(type(self))}  # an import path for a class kept outside marl
        if self.user_modules:  # the user's modules, imported again wherever this config is loaded
            out["imports"] = list(self.user_modules)
        for name in SECTION_NAMES:
            section = dataclasses.asdict(getattr(self, name + "_cfg"))
            out[name] = _plain(section)
        if self.psro_cfg is not None:  # only a PSRO run has the section
            out["psro"] = dataclasses.asdict(self.psro_cfg)
        wf = self.workflow
        out["workflow"] = wf.to_dict() if hasattr(wf, "to_dict") else _plain(wf)
        return out

    # -- what the runtime asks of a config (validate and evaluation_runner_config: config_validation.py) --
    def self_play(self) -> SelfPlay | None:
        return SelfPlay.from_any(self.multi_agent_cfg.self_play)

    def league(self) -> League | None:
        league = League.from_any(self.multi_agent_cfg.league)
        if league is not None and self.multi_agent_cfg.self_play is not None:
            raise MappingError("multi_agent.self_play and multi_agent.league are alternatives; declare one of them")
        return league

    def seated_pool(self) -> SelfPlay | League | None:
        """The self-play pool or the league, whichever is declared: the trained `policy` against seated opponents."""
        sp, league = self.self_play(), self.league()  # league() refuses both at once
        return sp or league

    def policy_specs(self) -> dict[str, PolicySpec]:
        policies = self.multi_agent_cfg.policies or dict.fromkeys(default_groups(self) or [DEFAULT_POLICY_ID])
        specs = {str(pid): PolicySpec.from_any(str(pid), spec) for pid, spec in policies.items()}
        sp = self.seated_pool()
        return sp.add_pool(specs) if sp is not None else specs

    def policy_mapping(self) -> PolicyMapping:
        mapping, sp, league = self.multi_agent_cfg.policy_mapping, self.self_play(), self.league()
        if mapping is None and (groups := default_groups(self)):  # agents that differ: a policy per group
            mapping = group_mapping(groups)
        if mapping is None and sp is not None:
            mapping = sp.mapping
        if mapping is None and league is not None:  # stateful: the matchmaking node sends it its table
            mapping = LeagueMapping(league, self.debugging_cfg.seed or 0)
        return PolicyMapping(mapping, list(self.policy_specs()))

    def trained_policy_ids(self, all_ids: list[str]) -> list[str]:
        wanted = self.multi_agent_cfg.policies_to_train
        sp, league = self.self_play(), self.league()
        if wanted is None and sp is not None:  # the snapshots are frozen
            wanted = [p for p in all_ids if p not in sp.opponent_ids]
        if wanted is None and league is not None:
            wanted = league.trained_ids
        return list(all_ids) if wanted is None else [p for p in all_ids if p in wanted]

    # -- what one policy needs from its algorithm: one plan (marl.config.policy_plan) --------------
    def plan_for(self, policy_id: str) -> PolicyPlan:
        """Everything runners, connectors, learners, replay and checkpoints need of one policy's algorithm."""
        return self._plan(policy_id)

    def _plan(self, policy_id: str) -> PolicyPlan:
        """The base plan; an algorithm folder overrides this (super()._plan, then dataclasses.replace)."""
        spec = self.policy_specs()[policy_id]
        declared = section_fields(self.training_cfg)  # a MIXED run's top-level training section has no model
        model = self.training_cfg.model if "model" in declared else {}
        # `auto` (PPO's, until it builds): no options yet, and what resolution adds is widths and activation only
        model = dict(model) if isinstance(model, dict) else {}
        model.update(spec.model)
        module_class = self.module_class_for(spec)
        if module_class == self.module_class_for(dataclasses.replace(spec, module_class=None)):
            reads = model_keys(module_class, model)
            for key in self.model_options:  # a value still `auto` (set when the config builds) or None is not handed on
                value = getattr(self.training_cfg, key)
                if (reads is None or key in reads) and value is not None and not (isinstance(value, str) and value == AUTO):
                    model.setdefault(key, list(value) if isinstance(value, tuple) else value)
        return PolicyPlan(
            module_class=module_class, model=model, training=self.training_cfg,
            parts=self.algorithm_parts(), columns=self.columns_for(policy_id), replay=None,
            target_update=self.target_update, unsquash_actions=self.environment_cfg.unsquash_actions,
            burn_in=0, group_agent_indices=None, algo_name=self.algo_name, capabilities=self.capabilities,
        )

    # what the base plan is made of: the folder's declarations
    def module_class_for(self, spec: PolicySpec):
        """The module class a policy is built with: its own, else the algorithm's default."""
        return spec.module_class if spec.module_class is not None else self.default_module_class

    def columns_for(self, policy_id: str) -> frozenset[str]:
        """The sample columns the algorithm asks runners for (the plan's `columns`; cheap: no env, no model)."""
        return self.sample_columns

    def algorithm_parts(self) -> AlgorithmParts:
        raise NotImplementedError

    def target_update(self, updates_per_round: float) -> tuple[int, float]:
        """(every_env_steps, tau) of a replay-trained policy's `update_target` node in a MIXED graph, given its
        learner updates per sampling round; DQN's keys here (SAC compounds its per-update Polyak weight)."""
        t = self.training_cfg
        return int(t.target_network_update_freq), float(t.tau)

    def runner_columns(self, policy_id: str) -> frozenset[str]:
        """What runners record for a policy: its plan's columns, plus what recording keeps
        (`offline.output`: action log-probs and next observations)."""
        columns = self.plan_for(policy_id).columns
        return columns | RECORDED_COLUMNS if self.offline_cfg.output else columns

    def global_state_spec(self) -> dict | None:
        """{source, dim, num_agents} of the env's global state (the env spec's) when a policy's columns hold it."""
        if not any(sb.STATE in self.columns_for(pid) for pid in self.policy_specs()):
            return None
        return self.env_spec().global_state

    def default_workflow(self):
        raise NotImplementedError

    def env_spec(self) -> EnvSpec:
        """The env's agents, spaces, global state, groups and `auto` wrappers (`marl.algorithms.env_spec`): resolved
        from one env the first time it is asked for this env, then kept (and shipped with the config)."""
        if self._env_spec is None or not self._env_spec.fits(self.environment_cfg):
            self._env_spec = resolve_env_spec(self)
        return self._env_spec

    def resolve_auto_keys(self, env_spec: Callable[[], EnvSpec]) -> None:
        """Sets, in place, the training keys the algorithm picks when it builds (PPO's `auto` ones, from
        `env_spec()`, asked only where a key is `auto`); the base has none."""

    built_form = False  # True on what `resolved` returns (and its copies): components use it as it is

    def resolved(self) -> "AlgorithmConfig":
        """A copy with the keys the algorithm picks when it builds set (`resolve_auto_keys`): what `build` runs."""
        out = self.copy()
        resolve_env_choices(out)  # wrappers, action kind, agent groups: config.yaml names what the run is made with
        out.resolve_auto_keys(out.env_spec)
        out.built_form = True
        return out

    def as_built(self) -> "AlgorithmConfig":
        """What a runner or learner works from: this config once resolved, else its resolved copy (one made straight
        from an unbuilt config sees PPO's `auto` keys set, as `build` sets them)."""
        return self if self.built_form else self.resolved()

    def build(self):
        self.validate()
        self.env_creator = registered_creator(self.environment_cfg.env)
        return Algorithm(self.resolved())
