"""Benchmark records: one JSON file per run, and benchmarks/README.md generated from them.

A record (`results/NAME/DATE[-VARIANT].json`) holds what one run measured and where:

    benchmark   the script's name (`sampling` for benchmarks/speed/sampling.py)
    variant     "" or a label for a different setting of the same script (its own "latest")
    title       a few words on what this run is (or null)
    date        "YYYY-MM-DD[ HH:MM]" UTC
    command     the command lines that produced it
    commit      the marl commit measured (or null where not recorded)
    machine     the machine in words (or null)
    load_avg    the 1-minute load average around the run, in words (or null)
    source      "python -m benchmarks" for a harness run; where a converted figure came from otherwise
    blocks      the body, in order: {"table": {"title", "headers", "rows"}} or {"text": markdown}

`benchmarks/about.md` is the README's hand-written part (what each script measures and how), in one
`## ... (`GROUP/`)` section per group of scripts (speed/, peers/, studies/) holding a `### ... (`NAME.py`)`
section per script of that group; the README is about.md with, at the end of each script's section,
the latest record of each variant of NAME and a table of the earlier ones. A record's `command` is
the command as it was run: records from before the groups (2026-11-29) name `benchmarks/NAME.py`.
`python -m benchmarks readme` writes the README; `--check` says whether the committed one is what the records give (tests/test_benchmarks.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

KEYS = ("benchmark", "variant", "title", "date", "command", "commit", "machine", "load_avg", "source", "blocks")
VARIANT = re.compile(r"^[\w.-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2})?$")
_GROUP = re.compile(r"^## .*\(`(\w+)/`\)")
_SECTION = re.compile(r"^### .*\(`(\w+)\.py`")


def check_record(record: dict, where: str) -> None:
    """Raises ValueError naming the file and the key when a record does not have the schema above."""
    missing = [k for k in KEYS if k not in record]
    extra = [k for k in record if k not in KEYS]
    if missing or extra:
        raise ValueError(f"{where}: keys missing {missing}, unknown {extra}; a record has {list(KEYS)}")
    if not _DATE.match(record["date"]):
        raise ValueError(f"{where}: date {record['date']!r} is not 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM'")
    if not VARIANT.match(record["variant"]):
        raise ValueError(f"{where}: variant {record['variant']!r} may hold letters, digits, '_', '-' and '.'")
    if not isinstance(record["command"], list):
        raise ValueError(f"{where}: command must be a list of command lines")
    for block in record["blocks"]:
        if set(block) == {"text"}:
            continue
        table = block.get("table")
        if set(block) != {"table"} or set(table) != {"title", "headers", "rows"}:
            raise ValueError(f"{where}: a block is {{'text': ...}} or {{'table': {{'title', 'headers', 'rows'}}}}")
        if any(len(row) != len(table["headers"]) for row in table["rows"]):
            raise ValueError(f"{where}: a row of table {table['title']!r} has not {len(table['headers'])} cells")


def file_name(record: dict) -> str:
    stem = record["date"].replace(" ", "T").replace(":", "")
    return f"{stem}-{record['variant']}.json" if record["variant"] else f"{stem}.json"


def write_record(record: dict, results: Path) -> Path:
    check_record(record, "new record")
    path = results / record["benchmark"] / file_name(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return path


def load_records(results: Path) -> list[tuple[str, dict]]:
    """(path relative to results/, record) of every record, checked."""
    out = []
    for path in sorted(results.glob("*/*.json")):
        record = json.loads(path.read_text())
        rel = path.relative_to(results).as_posix()
        check_record(record, f"benchmarks/results/{rel}")
        if path.parent.name != record["benchmark"]:
            raise ValueError(f"benchmarks/results/{rel}: benchmark {record['benchmark']!r} is not its folder's name")
        out.append((rel, record))
    return out


def table_markdown(table: dict) -> str:
    lines = [f"**{table['title']}**", ""] if table["title"] else []
    for cells in (table["headers"], ["---"] * len(table["headers"]), *table["rows"]):
        lines.append("|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|")
    return "\n".join(lines)


def record_markdown(rel: str, record: dict) -> str:
    head = "#### Latest" + (f", {record['variant']}" if record["variant"] else "") + f": {record['date']}"
    if record["title"]:
        head += f" ({record['title']})"
    facts = [f"record `results/{rel}`"]
    facts += [f"{label} {record[key]}" for key, label in (("commit", "commit"), ("load_avg", "load average"))
              if record[key]]
    if record["machine"]:
        facts.append(f"machine: {record['machine']}")
    facts_line = "; ".join(facts)
    parts = [head, facts_line[0].upper() + facts_line[1:] + "."]
    texts = "\n".join(b["text"] for b in record["blocks"] if "text" in b)
    if record["command"] and not all(line in texts for line in record["command"]):
        parts.append("```bash\n" + "\n".join(record["command"]) + "\n```")
    parts += [b["text"] if "text" in b else table_markdown(b["table"]) for b in record["blocks"]]
    return "\n\n".join(parts)


def history_markdown(earlier: list[tuple[str, dict]]) -> str:
    rows = ["| date | variant | run | load average | record |", "| --- | --- | --- | --- | --- |"]
    rows += [f"| {r['date']} | {r['variant'] or '-'} | {r['title'] or '-'} | {r['load_avg'] or '-'} | "
             f"`results/{rel}` |" for rel, r in earlier]
    return "#### Earlier records (data in `results/`, newest first)\n\n" + "\n".join(rows)


def section_markdown(records: list[tuple[str, dict]]) -> str:
    """The latest record of each variant (variants in order of their latest date), then the earlier ones."""
    newest_first = sorted(records, key=lambda item: item[1]["date"], reverse=True)
    latest, earlier, seen = [], [], set()
    for rel, record in newest_first:
        (earlier if record["variant"] in seen else latest).append((rel, record))
        seen.add(record["variant"])
    parts = [record_markdown(rel, record) for rel, record in latest]
    if earlier:
        parts.append(history_markdown(earlier))
    return "\n\n".join(parts)


def render_readme(root: Path, groups: dict[str, str]) -> str:
    """about.md with each script's records after its section; `groups`: script name -> its group (folder).

    Raises ValueError where about.md and the folders disagree: a group with scripts but no section, a script's
    section under another group's or naming no script, records with no section to go in."""
    records = load_records(root / "results")
    by_name: dict[str, list] = {}
    for rel, record in records:
        by_name.setdefault(record["benchmark"], []).append((rel, record))
    sections: list[list[str]] = [[]]
    for line in (root / "about.md").read_text().splitlines():
        if line.startswith(("## ", "### ")):
            sections.append([])
        sections[-1].append(line)
    placed, seen_groups, group, out = set(), set(), None, []
    for lines in sections:
        text = "\n".join(lines).strip("\n")
        group_match = _GROUP.match(lines[0]) if lines else None
        if group_match:
            group = group_match.group(1)
            seen_groups.add(group)
        elif lines and lines[0].startswith("## "):
            group = None
        match = _SECTION.match(lines[0]) if lines else None
        if match:
            name = match.group(1)
            if name not in groups:
                raise ValueError(f"benchmarks/about.md: section {lines[0]!r} names no benchmark script")
            if groups[name] != group:
                raise ValueError(f"benchmarks/about.md: section {lines[0]!r} is under "
                                 f"{f'{group}/' if group else 'no group'}, its script in {groups[name]}/")
            if name in by_name:
                placed.add(name)
                text += "\n\n" + section_markdown(by_name[name])
        out.append(text)
    missing_groups = sorted(set(groups.values()) - seen_groups)
    if missing_groups:
        raise ValueError(f"benchmarks/about.md has no '## ... (`GROUP/`)' section for {missing_groups}")
    unplaced = sorted(set(by_name) - placed)
    if unplaced:
        raise ValueError(f"benchmarks/about.md has no '### ... (`NAME.py`)' section for the records of {unplaced}")
    return "\n\n".join(t for t in out if t) + "\n"
