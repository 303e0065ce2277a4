"""MkDocs hook (mkdocs.yml `hooks:`): the pages' generated parts, made at build time.

- `<!-- public-names -->` (docs/api.md): one section per public name of `marl` (its `__all__`),
  headed `marl.NAME` (anchor `#marl.NAME`) with mkdocstrings' entry for the object. Config classes
  of algorithms added later (found by marl's registry) get their entry without editing the page.
"""

from __future__ import annotations

import inspect

API_MARKER = "<!-- public-names -->"


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


def on_page_markdown(markdown: str, page, config, files):
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, api_entries())
    return markdown
