"""The scenario reference and defaults, generated from the config classes' typed sections (`doc()` metadata).

    python -m marl.algorithms.reference > docs/scenario_reference.md   # the shared sections
    marl reference [ALGO ...]     # the same plus each algorithm's `training` table (every algorithm without ALGO)
    marl defaults ALGO            # every key of an ALGO scenario with its default, as YAML

tests/test_docs.py checks the committed file matches what this prints, so a new
shared key shows up in the reference or fails CI. An algorithm's own keys live
only in its config class (its folder): nothing to regenerate when one is added.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence

from marl.algorithms.algorithm_config import SECTION_NAMES, AlgorithmConfig
from marl.config.checks import _type_name
from marl.config.psro_section import PSROSection
from marl.config.registry import config_class
from marl.modules.catalog import MODEL_INTRO, MODEL_OPTIONS
import yaml

SECTION_INTROS = {
    "environment": "Which env to run and how its actions are adapted.",
    "env_runners": "Sampling: how many runner actors, env copies and steps per fragment.",
    "multi_agent": "Policies, which agent acts with which policy, and which policies learn.",
    "training": "The algorithm's own hyperparameters (one table per algorithm).",
    "learners": "Where and how the learner updates run.",
    "debugging": "Seeds and logging.",
    "evaluation": "Greedy evaluation episodes during training.",
    "stop": "When `marl train` stops: the first criterion met wins (none set: until Ctrl-C).",
    "checkpointing": "When `marl train` writes the run's `checkpoint/` (read by `--resume` and `marl evaluate`).",
    "loggers": "Where a run's metrics, config and checkpoint go besides `result.jsonl`: TensorBoard, CSV, MLflow, Weights & Biases.",
    "offline": "Recording sampled batches as Parquet, and the recorded files offline algorithms (BC, MARWIL, CQL) train from.",
    "connectors": "Pipelines of pieces: env->module (observations, every step), module->env (actions), learner (each train batch).",
}


PSRO_INTRO = (
    "PSRO around the scenario's algorithm, which trains the best responses. A scenario with this section is a PSRO "
    "run: `marl train` runs `epochs` epochs (one result row each, the population saved under `population/`), "
    "`marl graph` draws the PSRO loop, `marl league RUN_DIR` its ratings and payoffs. Without it, nothing changes."
)

TRAINING_ELSEWHERE = (
    "The algorithm's own hyperparameters, declared by its config class (the folder `marl/algorithms/<algo>/`): "
    "`marl reference ALGO` prints its table (key, type, default, allowed values, meaning) and its capabilities "
    "(action spaces, recurrent models, overlap, MIXED, ...: what validation refuses), "
    "`marl defaults ALGO` every key of an ALGO scenario with its default as YAML."
)
CAPABILITIES_INTRO = (
    "What each algorithm can train, from the record its config class declares (`marl.config.capabilities`); "
    "a scenario asking for more is refused with one line when it is validated (action spaces: once the env is made)."
)


def defaults_yaml(algo: str) -> str:
    """Every key a scenario of `algo` may set, with its default (a valid scenario once `environment.env` is set)."""

    cls = config_class(algo)
    header = [
        f"# {cls.algo_name} defaults: every key a {cls.algo_name} scenario may set, with its default value.",
        f"# Printed by `marl defaults {cls.algo_name}` from marl.{cls.__name__}(); `marl reference {cls.algo_name}` says what each key means.",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(cls().to_dict(), sort_keys=False)


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict) and not value:
        return "`{}`"
    return f"`{value}`"


def _checks_text(meta: typing.Mapping) -> str:
    parts = []
    if "choices" in meta:
        parts.append("one of " + ", ".join(f"`{c}`" for c in meta["choices"]))
    if "min" in meta:
        parts.append(f">= {meta['min']}")
    if "max" in meta:
        parts.append(f"<= {meta['max']}")
    if meta.get("auto"):
        parts.append("or `auto`" if parts else "`auto`")
    return "; ".join(parts)


def section_table(section_cls) -> list[str]:
    hints = typing.get_type_hints(section_cls)
    lines = ["| key | type | default | allowed | meaning |", "| --- | --- | --- | --- | --- |"]
    for f in dataclasses.fields(section_cls):
        doc = f.metadata.get("doc", "").replace("|", "\\|")
        allowed = _checks_text(f.metadata)
        lines.append(f"| `{f.name}` | {_type_name(hints[f.name]).replace('|', 'or')} | {_default_text(f)} | {allowed} | {doc} |")
    return lines


def capabilities_table(classes: dict[str, type]) -> list[str]:
    """One row per algorithm, one column per fact of its `Capabilities`; notes below the table."""
    rows = {algo: cls.capabilities.rows() for algo, cls in classes.items()}
    facts = [fact for fact, _ in next(iter(rows.values())) if fact != "note"]
    lines = ["## Capabilities", "", CAPABILITIES_INTRO, "",
             "| algorithm | " + " | ".join(facts) + " |", "| --- |" + " --- |" * len(facts)]
    notes = []
    for algo, pairs in rows.items():
        values = dict(pairs)
        lines.append(f"| {algo} | " + " | ".join(values[fact] for fact in facts) + " |")
        if "note" in values:
            notes.append(f"- {algo}: {values['note']}")
    return lines + ([""] + notes if notes else []) + [""]


def _model_table() -> list[str]:
    lines = ["### `training.model` (the default modules)", "", MODEL_INTRO, "",
             "| key | type | default | allowed | meaning |", "| --- | --- | --- | --- | --- |"]
    for key, kind, default, allowed, meaning in MODEL_OPTIONS:
        lines.append(f"| `{key}` | {kind} | {default} | {allowed} | {meaning} |")
    return lines + [""]


def scenario_reference(algorithms: Sequence[str] = ()) -> str:
    """The markdown reference: the shared sections, plus the `training` table of each algorithm named.

    With no algorithm it is docs/scenario_reference.md.
    """
    classes = {config_class(name).algo_name: config_class(name) for name in algorithms}
    algo_text = (
        "the algorithm: " + ", ".join(f"`{a}`" for a in classes) if classes
        else "the algorithm's name (`marl train --help` lists them under `--algo`)"
    )
    out = [
        "# Scenario reference",
        "",
        f"<!-- Printed by `marl reference {' '.join(classes)}` from the config classes. -->" if classes else
        "<!-- Generated by `python -m marl.algorithms.reference > docs/scenario_reference.md`; do not edit by hand. -->",
        "",
        "A scenario file is YAML with these top-level keys; every section key is optional",
        "and falls back to the default below. Any key can be overridden on the command line as",
        "`section.key=value` (`marl train scenario.yaml training.lr=1e-4`). An unknown key is rejected",
        "with the nearest valid one; a wrong type or a value outside *allowed* is named.",
        "",
        "| top-level key | meaning |",
        "| --- | --- |",
        f"| `algo` | {algo_text} (required) |",
        "| `name` | a label for the scenario (ignored by the runtime) |",
        "| `imports` | modules of yours imported first (`imports: [my_envs]`: ones that call `marl.register_env` or define "
        "a class the scenario names), from the scenario's folder or the working directory; recorded in config.yaml and "
        "checkpoints, so `--resume`, `marl evaluate`, `Algorithm.from_checkpoint` and Tune trials import them again |",
    ]
    for name in SECTION_NAMES:
        out.append(f"| `{name}` | {SECTION_INTROS.get(name, '')} |")
    out += [
        "| `workflow` | the training graph (`nodes: {name: {op: ..., after: ..., **settings}}`); `null`: the algorithm's default |",
        f"| `psro` | {PSRO_INTRO.split('.')[0]} (optional) |",
        "",
    ]
    if classes:
        out += capabilities_table(classes)
    base = AlgorithmConfig()
    for name in SECTION_NAMES:
        if name == "training":
            if not classes:
                out += ["## `training`", "", TRAINING_ELSEWHERE, ""]
            out += _model_table()
            for algo, cls in classes.items():
                out += [f"## `training` ({algo})", "", SECTION_INTROS["training"], "", *section_table(cls.training_section_cls), ""]
            continue
        cls = type(getattr(base, name + "_cfg"))
        out += [f"## `{name}`", "", SECTION_INTROS.get(name, ""), "", *section_table(cls), ""]
    out += ["## `psro`", "", PSRO_INTRO, "", *section_table(PSROSection), ""]
    out += [
        "## `workflow`",
        "",
        "A graph of operators replacing the algorithm's default (see the docs' *Your own operator and",
        "algorithm*). Each node names its operator with `op`, the nodes feeding it with `after` (a name or a",
        "list, in input order) and the operator's settings as further keys; values may interpolate the",
        "config (`${training.train_batch_size}`). `marl graph SCENARIO.yaml` prints and draws it.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    import sys

    print(scenario_reference(sys.argv[1:]), end="")
