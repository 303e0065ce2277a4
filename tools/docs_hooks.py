"""MkDocs hook (mkdocs.yml `hooks:`): the pages' generated parts, made at build time.

- `<!-- public-names -->` (docs/api.md): one section per public name of `marl` (its `__all__`),
  headed `marl.NAME` (anchor `#marl.NAME`) with mkdocstrings' entry for the object. Config classes
  of algorithms added later (found by marl's registry) get their entry without editing the page.
- `<!-- readme: HEADING -->` (tutorials): the README's section under HEADING, so the README stays
  the one source of those texts; its subsections sit one level under the page's `##` headings,
  links to docs/ point into the site and links to other repo files become code spans.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

API_MARKER = "<!-- public-names -->"
README = Path(__file__).resolve().parents[1] / "README.md"
INCLUDE = re.compile(r"<!-- readme: (.+?) -->")
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#+) (.*)$")


def api_entries() -> str:
    import marl

    groups: dict[str, list] = {"Classes": [], "Functions": []}
    for name in marl.__all__:
        obj = getattr(marl, name)
        groups["Classes" if inspect.isclass(obj) else "Functions"].append((name, obj))
    lines = []
    for title, entries in groups.items():
        lines += [f"## {title}", ""]
        for name, obj in entries:
            summary = (inspect.getdoc(obj) or "").split("\n")[0]
            lines += [f"### `marl.{name}` {{#marl.{name}}}", "", summary, "",
                      f"::: {obj.__module__}.{obj.__qualname__}", "    options:", "      heading_level: 4", ""]
    return "\n".join(lines)


def _lines_outside_code(text: str):
    """(line, inside a fenced code block?) for each line."""
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            yield line, True
            continue
        yield line, in_code


def readme_section(heading: str) -> tuple[str, int]:
    """The README's section under `heading` (to the next heading of its level or higher) and that level."""
    lines = list(_lines_outside_code(README.read_text(encoding="utf-8")))
    for i, (line, code) in enumerate(lines):
        match = HEADING.match(line)
        if match and not code and match.group(2).strip() == heading:
            level, body = len(match.group(1)), []
            for follow, follow_code in lines[i + 1 :]:
                nxt = HEADING.match(follow)
                if nxt and not follow_code and len(nxt.group(1)) <= level:
                    break
                body.append(follow)
            return "\n".join(body).strip("\n"), level
    raise ValueError(f"README.md has no section '{heading}' (a docs page includes it)")


def _shift_headings(text: str, shift: int) -> str:
    out = []
    for line, code in _lines_outside_code(text):
        match = HEADING.match(line)
        if match and not code:
            line = "#" * max(1, len(match.group(1)) + shift) + " " + match.group(2)
        out.append(line)
    return "\n".join(out)


def _fit_links(text: str, page_path: str) -> str:
    up = "../" * page_path.count("/")

    def fix(match):
        bang, label, target = match.groups()
        if re.match(r"^[a-z]+://", target) or target.startswith("#"):
            return match.group(0)
        if target.startswith("docs/"):
            return f"{bang}[{label}]({up}{target[len('docs/'):]})"
        return f"`{target}`" if label.strip("`") == target else f"{label} (`{target}`)"

    return LINK.sub(fix, text)


def on_page_markdown(markdown: str, page, config, files):
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_entries())

    def include(match):
        text, level = readme_section(match.group(1).strip())
        return _fit_links(_shift_headings(text, 2 - level), page.file.src_uri)

    return INCLUDE.sub(include, markdown)
