"""A run composed from config groups: algorithm x task x experiment, a scenario file, the command line.

    marl train algorithm=mappo task=vmas/balance experiment=benchmarl_vmas training.lr=1e-4

Groups are folders of YAML files under `conf/` (`marl/conf`, shipped with the package; `$MARL_CONF_PATH`
folders are searched first): `algorithm/<name>.yaml`, `task/<family>/<task>.yaml`, `experiment/<name>.yaml`.
An `algorithm=` option that names no file but a registered algorithm (`algorithm=qmix`) is that algorithm
with its class defaults. One precedence, low to high:

    class defaults < algorithm < task < experiment < scenario file < command line

A task's family file (`task/<family>/_family.yaml`: what every task of the family shares) sits under the task.
A file holds only what it changes. A group file's `on_policy:` / `off_policy:` block applies only to an
algorithm of that family (`algorithm_family`), so a task can carry the settings that suit each family. A
scenario file may begin with a `defaults:` list ([{algorithm: ppo}, {task: mpe/simple_spread}]); an
option on the command line replaces the list's. Layers merge key by key; a list, and the tables in
`REPLACED_WHOLE`, are replaced whole by a later layer. Each key remembers the file and line (or the command
line) that set it last: `marl train ... --cfg` prints them, and every config error names it.

OmegaConf, not Hydra's compose API: the lowest layer is the typed config classes (not YAML), each key's
origin must be kept for `--cfg` and the error messages, and the CLI parses its own arguments.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
from pathlib import Path

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from marl.config.registry import config_class, discovered
from marl.config.scenario import TOP_LEVEL, config_from_dict
from marl.errors import ConfigError
from marl.modules.build import model_keys

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # marl/conf (the repository's conf/ links to it)
GROUPS = ("algorithm", "task", "experiment")
FAMILIES = ("on_policy", "off_policy")
REPLACED_WHOLE = ("multi_agent.policies", "multi_agent.policy_mapping")  # an ordered table or a set: never merged
COMMAND_LINE = "command line"
FAMILY_FILE = "_family"  # conf/task/<family>/_family.yaml: the settings every task of the family shares
DEFAULT = "default"


def search_path() -> list[Path]:
    """The conf folders, first match wins: `$MARL_CONF_PATH` (os.pathsep-separated), then marl's own."""
    extra = [Path(p) for p in os.environ.get("MARL_CONF_PATH", "").split(os.pathsep) if p]
    return extra + [CONF_DIR]


def algorithm_family(cls) -> str | None:
    """'on_policy' (its train batch counts fresh agent steps: PPO, MAPPO, A2C, APPO, ...), 'off_policy' (it replays
    at a `training_intensity`: DQN, SAC, QMIX, MASAC, ...) or None (offline, MIXED): which block of a group file applies."""
    if getattr(cls, "batch_in_agent_steps", False):
        return "on_policy"
    if "training_intensity" in {f.name for f in dataclasses.fields(cls.training_section_cls)}:
        return "off_policy"
    return None


def group_options(group: str) -> list[str]:
    """The options of a group: its files (task: 'vmas/navigation'), and for `algorithm` every registered algorithm."""
    found = set()
    for root in search_path():
        folder = root / group
        if folder.is_dir():
            found |= {str(p.relative_to(folder).with_suffix("")) for p in folder.rglob("*.yaml")
                      if not p.name.startswith("_")}
    if group == "algorithm":
        found |= {name.lower() for name in discovered()}
    return sorted(found)


def option_file(group: str, option: str) -> Path | None:
    for root in search_path():
        path = root / group / f"{option}.yaml"
        if path.is_file():
            return path
    return None


def label_of(path: Path) -> str:
    """How a file is named in origins: conf/<group>/... for a conf file, else as given."""
    for root in search_path():
        try:
            return str(Path("conf") / path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def check_group(group: str, where: str) -> None:
    if group not in GROUPS:
        near = difflib.get_close_matches(group, GROUPS, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise ConfigError(f"{where}: unknown config group '{group}'{hint}; groups: {list(GROUPS)}")


def _check_option(group: str, option: str, where: str) -> None:
    options = group_options(group)
    if option not in options and not (group == "algorithm" and option.upper() in discovered()):
        near = difflib.get_close_matches(option, options, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        raise ConfigError(f"{where}: unknown {group} '{option}'{hint}; options: {options} (marl configs {group})")


@dataclasses.dataclass
class Layer:
    label: str  # a file (conf/task/vmas/navigation.yaml, scenarios/x.yaml) or COMMAND_LINE
    data: dict
    lines: dict  # dotted key -> line in the file (1-based)
    line_prefix: str = ""  # where `data` sits in the file ('on_policy.' for a family block)
    override: str | None = None  # a command-line item's dotted key: a table below it is added to, not replaced


def read_yaml(path: Path, where: str) -> Layer:
    """A YAML mapping with the line of each key (dotted), for the origins."""
    try:
        text = path.read_text()
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=False) if text.strip() else {}  # (1e-4: a float)
        node = yaml.compose(text)
    except Exception as err:  # YAML syntax errors come in several types
        raise ConfigError(f"{where} '{path}' is not valid YAML: {err}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where} '{path}' must hold a mapping of sections")
    lines: dict[str, int] = {}

    def walk(n, prefix):
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                dotted = f"{prefix}{k.value}"
                lines[dotted] = k.start_mark.line + 1
                walk(v, dotted + ".")

    walk(node, "")
    return Layer(label_of(path), data, lines)


def _leaves(value, dotted: str):
    if isinstance(value, dict) and value and dotted not in REPLACED_WHOLE:
        for key, sub in value.items():
            yield from _leaves(sub, f"{dotted}.{key}")
    else:
        yield dotted


class Composition:
    """The layers merged (`data`: what `config_from_dict` takes) and where each key came from (`origins`)."""

    def __init__(self, name: str):
        self.name = name  # the run directory's stem
        self.data: dict = {}
        self.origins: dict[str, str] = {}  # dotted leaf -> 'file:line' or COMMAND_LINE
        self.selections: dict[str, str] = {}
        self.search_dirs: list[Path] = []

    def merge(self, layer: Layer) -> None:
        self._merge(self.data, layer.data, layer, "", layer.line_prefix)

    def _merge(self, into: dict, values: dict, layer: Layer, prefix: str, file_prefix: str) -> None:
        for key, value in values.items():
            dotted = f"{prefix}{key}"
            whole = dotted in REPLACED_WHOLE and (layer.override is None or layer.override == dotted)
            if isinstance(value, dict) and isinstance(into.get(key), dict) and not whole:
                self._merge(into[key], value, layer, dotted + ".", file_prefix)
                continue
            into[key] = copy.deepcopy(value)
            for old in [k for k in self.origins if k == dotted or k.startswith(dotted + ".")]:
                del self.origins[old]
            for leaf in _leaves(value, dotted):
                line = layer.lines.get(file_prefix + leaf) or layer.lines.get(file_prefix + dotted)
                self.origins[leaf] = f"{layer.label}:{line}" if line else layer.label

    def origin(self, key: str | None) -> str | None:
        """The origin of a dotted key, or of the nearest enclosing key that has one (None: a class default)."""
        parts = (key or "").split(".")
        for n in range(len(parts), 0, -1):
            head = ".".join(parts[:n])
            if head in self.origins:
                return self.origins[head]
        below = sorted(k for k in self.origins if k.startswith(f"{key}."))  # a section: the first key set in it
        return self.origins[below[0]] if below and key else None

    def attributed(self, err: ConfigError) -> ConfigError:
        """The error with the origin of its key in front ('scenarios/x.yaml:12: ...', 'command line: ...')."""
        where = self.origin(err.key)
        if where is None or str(err).startswith(where):
            return err
        return ConfigError(f"{where}: {err}", key=err.key)

    def config(self, validate: bool = False):
        """The AlgorithmConfig; `validate`: its whole-config checks too. Errors name the origin of their key."""
        try:
            config = config_from_dict(self.data, where=self.name, search_dirs=self.search_dirs, origin_of=self.origin)
            if validate:
                config.validate()
        except ConfigError as err:
            raise self.attributed(err) from None
        return config

    def annotated(self) -> str:
        """The composed config as YAML, each key with its origin (`marl train ... --cfg`); 'default': the class's."""
        full = self.config().to_dict()
        if full.get("workflow") is None:
            full.pop("workflow")
        selected = ", ".join(f"{g}={o}" for g, o in self.selections.items()) or "no groups"
        out, stack = [f"# {self.name}: composed from {selected}; each key's origin after it"], []
        for line in yaml.dump(full, Dumper=_FlowLists, sort_keys=False, width=10_000).splitlines():
            stripped = line.lstrip(" ")
            if stripped.startswith("- ") or ":" not in stripped:  # an item of a block list: its key is above
                out.append(line)
                continue
            stack = stack[:(len(line) - len(stripped)) // 2] + [stripped.split(":", 1)[0].strip("'\"")]
            if stripped.endswith(":"):  # a mapping or list below: its keys carry the origins
                out.append(line)
                continue
            out.append(f"{line}  # {self.origin('.'.join(stack)) or DEFAULT}")
        return "\n".join(out) + "\n"


class _FlowLists(yaml.SafeDumper):
    """Lists on one line ([64, 64]), so each list key carries its origin."""


_FlowLists.add_representer(list, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True))


def split_items(items: list[str]) -> tuple[dict[str, str], list[str]]:
    """Command-line items -> ({group: option}, key=value overrides)."""
    selections, overrides = {}, []
    for item in items:
        if "=" not in item:
            raise ConfigError(f"{COMMAND_LINE}: '{item}' must look like key=value (training.lr=1e-4) or group=option "
                              f"(task=vmas/balance; groups: {list(GROUPS)})")
        key, value = item.split("=", 1)
        if key in GROUPS:
            selections[key] = value
            continue
        if "." not in key and key not in TOP_LEVEL and difflib.get_close_matches(key, GROUPS, n=1, cutoff=0.8):
            check_group(key, COMMAND_LINE)  # a misspelt group, not a top-level key
        overrides.append(item)
    return selections, overrides


def _defaults_list(layer: Layer) -> dict[str, str]:
    entries = layer.data.pop("defaults")
    where = f"{layer.label}:{layer.lines.get('defaults', '?')}"
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: 'defaults' must be a list of group: option entries ([{{task: vmas/balance}}])")
    chosen = {}
    for entry in entries:
        if entry == "_self_":
            continue
        if not (isinstance(entry, dict) and len(entry) == 1):
            raise ConfigError(f"{where}: a 'defaults' entry must be one group: option mapping, got {entry!r}")
        (group, option), = entry.items()
        check_group(str(group), where)
        _check_option(str(group), str(option), where)
        chosen[str(group)] = str(option)
    return chosen


def _group_layers(group: str, option: str, algo_cls) -> list[Layer]:
    """The layers of a group option, low to high: a task family's `_family.yaml`, then the option's file, each
    followed by its block for the algorithm's family (`on_policy:` / `off_policy:`)."""
    path = option_file(group, option)
    if path is None:  # algorithm=<a registered name>: that algorithm with its class defaults
        return [Layer(f"algorithm={option}", {"algo": option.upper()}, {})]
    family_file = option_file(group, f"{option.rsplit('/', 1)[0]}/{FAMILY_FILE}") if "/" in option else None
    layers = []
    for file in [family_file, path] if family_file else [path]:
        layer = read_yaml(file, f"{group} file")
        blocks = {family: layer.data.pop(family) for family in FAMILIES if family in layer.data}
        if group != "algorithm" and "algo" in layer.data:
            raise ConfigError(f"{layer.label}:{layer.lines['algo']}: a {group} file does not choose the algorithm "
                              "(the algorithm group does); remove 'algo'")
        layers.append(layer)
        for family, block in blocks.items():
            if not isinstance(block, dict):
                raise ConfigError(f"{layer.label}:{layer.lines.get(family)}: '{family}' must be a mapping of sections")
            cls = algo_cls()
            if cls is not None and algorithm_family(cls) == family:
                layers.append(Layer(layer.label, _for_algorithm(block, cls, family, layer), layer.lines, f"{family}."))
    return layers


def _for_algorithm(block: dict, cls, family: str, layer: Layer) -> dict:
    """A family block's sections for one algorithm: a `training` key applies to the algorithms of the family that
    have it (BenchMARL's experiment sets exploration epsilon for every off-policy algorithm; MASAC has none), and a
    `training.model` option to those whose default module reads it (MAT's transformer reads no `hiddens`); a key
    no algorithm of the family has or reads is a typo, named with the nearest."""
    block = copy.deepcopy(block)
    training = block.get("training")
    if not isinstance(training, dict):
        return block
    kin = [c for c in discovered().values() if algorithm_family(c) == family]

    def fields(c) -> set:
        return {f.name for f in dataclasses.fields(c.training_section_cls)}

    def reads(c) -> set:
        return set(model_keys(c.default_module_class, training["model"]) or training["model"])

    training = block["training"] = _own_keys(training, fields(cls), set().union(*map(fields, kin)), layer,
                                             f"{family}.training", f"no {family} algorithm has it")
    if isinstance(training.get("model"), dict):
        training["model"] = _own_keys(training["model"], reads(cls), set().union(*map(reads, kin)), layer,
                                      f"{family}.training.model", f"no {family} algorithm's module reads it")
    return block


def _own_keys(table: dict, own: set, kin: set, layer: Layer, where: str, why: str) -> dict:
    """The keys of `table` in `own`; one in neither `own` nor `kin` is refused with the nearest of `kin`."""
    for key in table:
        if key not in kin:
            near = difflib.get_close_matches(str(key), sorted(kin), n=1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            raise ConfigError(f"{layer.label}:{layer.lines.get(f'{where}.{key}', '?')}: unknown key '{where}.{key}'"
                              f"{hint}: {why}", key=f"{where.split('.', 1)[1]}.{key}")
    return {k: v for k, v in table.items() if k in own}


def _command_line_layer(overrides: list[str]) -> list[Layer]:
    layers = []
    for item in overrides:
        try:
            layers.append(Layer(COMMAND_LINE, OmegaConf.to_container(OmegaConf.from_dotlist([item]), resolve=False), {},
                                override=item.split("=", 1)[0]))
        except OmegaConfBaseException as err:
            raise ConfigError(f"{COMMAND_LINE}: override '{item}': {err}".splitlines()[0]) from None
    return layers


def compose(scenario: str | Path | None = None, items: list[str] | tuple = (), name: str | None = None) -> Composition:
    """The composition of a scenario file (or none) and command-line items (group=option, key=value)."""
    selections, overrides = split_items(list(items))
    for group, option in selections.items():
        _check_option(group, option, COMMAND_LINE)
    scenario_layer = None
    if scenario is not None:
        path = Path(scenario)
        if not path.is_file():
            raise ConfigError(f"scenario file '{path}' does not exist")
        scenario_layer = read_yaml(path, "scenario file")
        if "defaults" in scenario_layer.data:
            selections = {**_defaults_list(scenario_layer), **selections}
    cli = _command_line_layer(overrides)
    comp = Composition(name or (Path(scenario).stem if scenario else _run_name(selections, overrides)))
    comp.selections = {g: selections[g] for g in GROUPS if g in selections}
    if scenario is not None:
        comp.search_dirs = [Path(scenario).parent]

    algorithm_layers = _group_layers("algorithm", selections["algorithm"], lambda: None) if "algorithm" in selections else []

    def algo_cls():  # the algorithm the layers choose, highest first; None: not yet known, or unknown (named later)
        for layer in [*reversed(cli), scenario_layer, *reversed(algorithm_layers)]:
            if layer is not None and layer.data.get("algo"):
                try:
                    return config_class(str(layer.data["algo"]))
                except ConfigError:
                    return None
        return None

    for layer in algorithm_layers:
        comp.merge(layer)
    for group in GROUPS[1:]:
        if group in selections:
            for layer in _group_layers(group, selections[group], algo_cls):
                comp.merge(layer)
    if scenario_layer is not None:
        comp.merge(scenario_layer)
    for layer in cli:
        comp.merge(layer)
    return comp


def _run_name(selections: dict, overrides: list[str]) -> str:
    parts = [selections.get("algorithm"), selections.get("task", "").replace("/", "-") or None]
    algo = next((item.split("=", 1)[1] for item in overrides if item.startswith("algo=")), None)
    env = next((item.split("=", 1)[1] for item in overrides if item.startswith("environment.env=")), None)
    name = "-".join(p for p in parts + [algo if not selections.get("algorithm") else None,
                                         env if not selections.get("task") else None] if p)
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "run"


def load_scenario(path: str | Path, overrides: list[str] | None = None):
    """An AlgorithmConfig from a scenario YAML file (its `defaults:` groups composed under it) plus `key=value`
    overrides (and group=option items)."""
    return compose(path, list(overrides or [])).config()
