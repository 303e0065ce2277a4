"""Suite files: tasks x algorithms x seeds at one env-step budget, for `marl experiment`.

    name: mpe_cooperative
    env_steps: 100000                  # every run's budget (stop.env_steps_total; other stop criteria are cleared)
    seeds: 5                           # or a list: [0, 1, 2]
    experiment: benchmarl_vmas         # optional: a conf/experiment group under every run (marl configs experiment)
    tasks:
      navigation: {task: vmas/navigation}   # a task: a config group (conf/task/<family>/<task>.yaml) ...
      simple_spread:                   # ... or an env with its config ...
        env: mpe2.simple_spread_v3
        env_config: {N: 3, max_cycles: 25, continuous_actions: false}
        overrides: {multi_agent.policy_mapping: {"agent_*": shared}}
      cartpole:                        # ... or a scenario file, whose sections other than algo/training/workflow/stop are kept
        scenario: scenarios/cartpole_ppo.yaml
    algorithms:
      IPPO: {algorithm: ippo}          # an algorithm: a config group (conf/algorithm), or its name,
      PPO: {scenario: scenarios/simple_spread_ppo.yaml}   # optionally a scenario file for its
      MAPPO: {overrides: {training.lr: 1.0e-3}}            # training section (environment replaced by the task's) and overrides
      QMIX: {}
    evaluation: {episodes: 10, interval: 5}   # greedy episodes every `interval` iterations and at the end (the run's score)
    checkpoint_frequency: 5            # iterations between checkpoints (an interrupted run resumes from the last one)
    overrides: {env_runners.num_envs_per_env_runner: 8}   # applied to every run
    imports: [my_envs]                 # modules imported first in every process (register_env calls)
    targets: {simple_spread: {PPO: {episode_return_mean: -60, env_steps: 50000}}}   # optional: only these
                                       # pairs run, each to its return or budget (marl/experiment/targets.py)

A run's config: the config groups (algorithm x task x experiment, composed as `marl train
algorithm=... task=... experiment=...` composes them: the task's family block for the algorithm
applies), then the algorithm's scenario, the task's sections, the task's overrides, the
algorithm's overrides, the suite's overrides, then the seed, the budget and the evaluation settings. Every run's config is built (and checked) when the suite is loaded, so a
bad key fails before anything trains, as one line naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from pathlib import Path

from omegaconf import OmegaConf

from marl.errors import ConfigError
from marl.execution.user_code import check_module_names, import_user_modules
from marl.config.compose import COMMAND_LINE, compose
from marl.config.scenario import config_from_dict
from marl.config.registry import config_class
from marl.experiment.targets import Target, parse_targets
import json

SUITE_KEYS = ("name", "env_steps", "seeds", "tasks", "algorithms", "evaluation", "checkpoint_frequency", "overrides", "imports",
              "targets", "experiment")
TASK_KEYS = ("task", "env", "env_config", "scenario", "overrides")
ALGORITHM_KEYS = ("algorithm", "algo", "scenario", "overrides")
EVALUATION_KEYS = ("episodes", "interval")
KEPT_FROM_TASK_SCENARIO = ("environment", "env_runners", "multi_agent", "learners", "debugging", "connectors", "evaluation", "loggers")
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run of a suite: (task, algorithm, seed) and its full config as a scenario dict + dotted overrides."""

    task: str
    algorithm: str
    seed: int
    scenario: dict
    overrides: tuple[str, ...]
    budget: int = 0  # env steps (stop.env_steps_total)
    target: float | None = None  # a `targets:` row stops once its training return reaches this

    @property
    def name(self) -> str:
        return f"{self.task}/{self.algorithm}/seed_{self.seed}"

    @property
    def relative_dir(self) -> Path:
        return Path(self.task) / self.algorithm / f"seed_{self.seed}"

    def config(self):
        return config_from_dict(self.scenario, list(self.overrides), where=f"run {self.name}")


@dataclasses.dataclass
class Suite:
    name: str
    path: Path
    env_steps: int
    seeds: list[int]
    tasks: dict
    algorithms: dict
    evaluation_episodes: int
    evaluation_interval: int | None
    checkpoint_frequency: int
    imports: list[str]
    runs: list[RunSpec]
    env_families: dict  # task -> env family name (the marl-eval JSON's environment level)
    targets: dict = dataclasses.field(default_factory=dict)  # (task, algorithm) -> Target

    def import_modules(self) -> None:
        import_suite_modules(self.path, self.imports)


def import_suite_modules(suite_path: Path, modules: list[str]) -> None:
    """Imports the suite's `imports`, with the suite's folder and the working directory on sys.path."""
    import_user_modules(modules, "suite 'imports': {module}", [Path(suite_path).resolve().parent])


def _scenario_imports(scenario: dict, file: Path, where: str) -> list[str]:
    """A task's or algorithm's scenario file's own `imports:`, imported from beside that file."""
    names = check_module_names(scenario.get("imports"), f"{where}: scenario '{file}'")
    return import_user_modules(names, f"{where}: scenario '{file}': imports: {{module}}", [file.parent])


def _unknown(where: str, key, allowed) -> ConfigError:
    near = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    return ConfigError(f"{where}: unknown key '{key}'{hint}; valid keys: {list(allowed)}")


def _mapping(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping, got {type(value).__name__} {value!r}")
    return value


def _check_keys(data: dict, allowed, where: str) -> None:
    for key in data:
        if key not in allowed:
            raise _unknown(where, key, allowed)


def _int(value, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where} must be an integer >= {minimum}, got {value!r}")
    return value


def _dotted(overrides, where: str) -> list[str]:
    """{'training.lr': 1e-3, 'env_runners': {...}} -> OmegaConf dotlist items."""
    items = []
    for key, value in _mapping(overrides, where).items():
        if isinstance(value, dict) and "." not in str(key) and key not in ("env_config",):
            items += _dotted({f"{key}.{k}": v for k, v in value.items()}, where)
            continue
        items.append(f"{key}={_dotlist_value(value)}")
    return items


def _dotlist_value(value) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    return json.dumps(value)  # lists, dicts, numbers, booleans: JSON is valid YAML flow syntax


def _load_yaml(path: Path, where: str) -> dict:
    if not path.is_file():
        raise ConfigError(f"{where}: file '{path}' does not exist")
    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as err:
        raise ConfigError(f"{where}: '{path}' is not valid YAML: {err}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: '{path}' must hold a mapping")
    return data


def _family(env: str) -> str:
    if "." in env and not env.split(".")[0][:1].isupper():
        return env.split(".")[0]  # mpe2.simple_spread_v3 -> mpe2
    return "gymnasium" if re.search(r"-v\d+$", env) else "registered"


def load_suite(path: str | Path, overrides: list[str] | None = None, extra_imports: list[str] | tuple = ()) -> Suite:
    """Reads and checks a suite file (plus `key=value` overrides of its own keys, e.g. env_steps=5000);
    `extra_imports` (`marl experiment --import`) join the suite's `imports`."""
    path = Path(path)
    data = _load_yaml(path, "suite")
    if overrides:
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override '{item}' must look like key=value, e.g. env_steps=50000")
        try:
            data = OmegaConf.to_container(OmegaConf.merge(OmegaConf.create(data), OmegaConf.from_dotlist(overrides)), resolve=False)
        except Exception as err:
            raise ConfigError(f"suite overrides: {err}".splitlines()[0]) from None
    where = str(path)
    _check_keys(data, SUITE_KEYS, where)
    experiment = data.get("experiment")
    for required in ("env_steps", "tasks", "algorithms"):
        if required not in data:
            raise ConfigError(f"{where}: '{required}' is required")
    name = str(data.get("name") or path.stem)
    env_steps = _int(data["env_steps"], f"{where}: 'env_steps'", 1)
    seeds_value = data.get("seeds", 1)
    if isinstance(seeds_value, int) and not isinstance(seeds_value, bool):
        seeds = list(range(_int(seeds_value, f"{where}: 'seeds'", 1)))
    elif isinstance(seeds_value, list) and seeds_value:
        seeds = [_int(s, f"{where}: 'seeds' entry", 0) for s in seeds_value]
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"{where}: 'seeds' repeats a seed: {seeds}")
    else:
        raise ConfigError(f"{where}: 'seeds' must be a count >= 1 or a non-empty list of seeds, got {seeds_value!r}")
    evaluation = _mapping(data.get("evaluation"), f"{where}: 'evaluation'")
    _check_keys(evaluation, EVALUATION_KEYS, f"{where}: 'evaluation'")
    episodes = _int(evaluation.get("episodes", 10), f"{where}: 'evaluation.episodes'", 1)
    interval = evaluation.get("interval")
    if interval is not None:
        interval = _int(interval, f"{where}: 'evaluation.interval'", 1)
    ckpt_freq = _int(data.get("checkpoint_frequency", 5), f"{where}: 'checkpoint_frequency'", 1)
    imports = data.get("imports") or []
    if not isinstance(imports, list) or not all(isinstance(m, str) for m in imports):
        raise ConfigError(f"{where}: 'imports' must be a list of module names, got {imports!r}")
    imports = list(dict.fromkeys(imports + list(extra_imports)))
    import_suite_modules(path, imports)
    suite_overrides = _dotted(data.get("overrides"), f"{where}: 'overrides'")

    tasks = _mapping(data["tasks"], f"{where}: 'tasks'")
    algorithms = data["algorithms"]
    if isinstance(algorithms, list):  # [PPO, MAPPO]: each algorithm with its defaults
        if not all(isinstance(a, str) for a in algorithms):
            raise ConfigError(f"{where}: 'algorithms' as a list must hold algorithm names, got {algorithms!r}")
        algorithms = {a: {} for a in algorithms}
    algorithms = _mapping(algorithms, f"{where}: 'algorithms'")
    if not tasks or not algorithms:
        raise ConfigError(f"{where}: 'tasks' and 'algorithms' must each name at least one entry")
    base = path.resolve().parent

    def resolve_file(file, where_):
        candidate = Path(file)
        for option in (candidate, base / candidate, base.parent / candidate):
            if option.is_file():
                return option
        raise ConfigError(f"{where_}: scenario file '{file}' does not exist (looked in ., {base}, {base.parent})")

    task_parts, families, task_groups, algo_groups = {}, {}, {}, {}
    for task, spec in tasks.items():
        w = f"{where}: task '{task}'"
        if not NAME_RE.match(str(task)):
            raise ConfigError(f"{w}: a task name may hold letters, digits, '_', '-' and '.' only")
        spec = _mapping(spec, w)
        _check_keys(spec, TASK_KEYS, w)
        sections: dict = {}
        if "scenario" in spec:
            file = resolve_file(spec["scenario"], w)
            scenario = _load_yaml(file, w)
            sections = {k: v for k, v in scenario.items() if k in KEPT_FROM_TASK_SCENARIO}
            imports = list(dict.fromkeys(imports + _scenario_imports(scenario, file, w)))
        group_env = None
        if "task" in spec:
            try:
                group_env = (compose(None, [f"task={spec['task']}"]).data.get("environment") or {}).get("env")
            except ConfigError as err:
                raise ConfigError(f"{w}: {_in_suite(err)}") from None
        env = spec.get("env") or (sections.get("environment") or {}).get("env") or group_env
        if not env:
            raise ConfigError(f"{w}: give 'task' (a config group), 'env' (an env id) or a 'scenario' file that names one")
        environment = dict(sections.get("environment") or {})
        environment["env"] = env
        if "env_config" in spec:
            environment["env_config"] = _mapping(spec["env_config"], f"{w}: 'env_config'")
        sections["environment"] = environment
        task_parts[task] = (sections, _dotted(spec.get("overrides"), f"{w}: 'overrides'"))
        task_groups[task] = spec.get("task")
        families[task] = _family(str(env))

    algo_parts = {}
    for label, spec in algorithms.items():
        w = f"{where}: algorithm '{label}'"
        if not NAME_RE.match(str(label)):
            raise ConfigError(f"{w}: an algorithm label may hold letters, digits, '_', '-' and '.' only")
        spec = _mapping(spec, w)
        _check_keys(spec, ALGORITHM_KEYS, w)
        scenario = {}
        if "scenario" in spec:
            file = resolve_file(spec["scenario"], w)
            scenario = _load_yaml(file, w)
            imports = list(dict.fromkeys(imports + _scenario_imports(scenario, file, w)))
        if "algorithm" in spec:
            try:
                chosen = compose(None, [f"algorithm={spec['algorithm']}"]).data["algo"]
            except ConfigError as err:
                raise ConfigError(f"{w}: {_in_suite(err)}") from None
            algo_groups[label] = spec["algorithm"]
        else:
            chosen = None
        algo = spec.get("algo") or scenario.get("algo") or chosen or label

        try:
            config_class(str(algo))
        except ConfigError as err:
            raise ConfigError(f"{w}: {err}") from None
        kept = {k: v for k, v in scenario.items() if k in ("training", "workflow", "learners", "env_runners", "connectors")}
        algo_parts[label] = (str(algo), kept, _dotted(spec.get("overrides"), f"{w}: 'overrides'"))

    targets = parse_targets(data.get("targets"), task_parts, algo_parts, env_steps, where)
    evaluation_overrides = [f"evaluation.evaluation_duration={episodes}", "evaluation.evaluation_duration_unit=episodes"]
    evaluation_overrides.append(f"evaluation.evaluation_interval={_dotlist_value(interval)}")
    runs = []
    for task, (task_sections, task_overrides) in task_parts.items():
        for label, (algo, algo_sections, algo_overrides) in algo_parts.items():
            if targets and (task, label) not in targets:
                continue
            target = targets.get((task, label), Target(None, env_steps))
            scenario = _grouped(algo, algo_groups.get(label), task_groups[task], experiment, f"{where}: task '{task}' x {label}")
            scenario = _deep_merge(scenario, {"algo": algo, **{k: v for k, v in algo_sections.items()}})
            if imports:  # each run's config.yaml and checkpoint record them: a run resumed by hand imports them too
                scenario["imports"] = list(imports)
            scenario = _deep_merge(scenario, {k: v for k, v in task_sections.items() if k != "environment"})
            environment = task_sections["environment"]  # a task group's environment is added to; another, replaced
            scenario["environment"] = _deep_merge(scenario.get("environment", {}), environment) if task_groups[task] else environment
            fixed = [
                f"stop.env_steps_total={target.env_steps}", f"stop.episode_return_mean={_dotlist_value(target.episode_return_mean)}",
                f"stop.episode_return_window={target.episode_return_window}",
                "stop.time_total_s=null",
                "stop.iterations=null", f"checkpointing.checkpoint_frequency={ckpt_freq}",
                "checkpointing.checkpoint_at_end=true", f"loggers.wandb_group={name}",
            ]
            for seed in seeds:
                spec = RunSpec(task, label, seed, scenario,
                               tuple(task_overrides + algo_overrides + suite_overrides + fixed + evaluation_overrides
                                     + [f"debugging.seed={seed}"]), target.env_steps, target.episode_return_mean)
                if seed == seeds[0]:  # the seeds' configs differ only in debugging.seed: check one
                    try:
                        spec.config().validate()
                    except ConfigError as err:
                        raise ConfigError(f"{where}: {err}") from None
                runs.append(spec)
    return Suite(name, path, env_steps, seeds, tasks, algorithms, episodes, interval, ckpt_freq, imports, runs, families, targets)


def _grouped(algo: str, algorithm: str | None, task: str | None, experiment: str | None, where: str) -> dict:
    """The config groups of one run composed (the task's family block for `algo`): the scenario dict under the rest."""
    items = [f"algorithm={algorithm}" if algorithm else f"algo={algo}"]
    items += [f"task={task}"] if task else []
    items += [f"experiment={experiment}"] if experiment else []
    try:
        return compose(None, items).data
    except ConfigError as err:
        raise ConfigError(f"{where}: {_in_suite(err)}") from None


def _in_suite(err: ConfigError) -> str:
    """A composition's message about a suite's group option: the suite, not the command line, gave it."""
    return str(err).removeprefix(f"{COMMAND_LINE}: ")


def _deep_merge(base: dict, top: dict) -> dict:
    """`top` over `base`, mappings key by key (an environment's env_config too), anything else replaced."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("policies", "policy_mapping"):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
