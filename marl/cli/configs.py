"""`marl configs [GROUP]`: the config groups under conf/ and their options (`marl.config.compose`)."""

from __future__ import annotations

from marl.config.compose import GROUPS, check_group, group_options, option_file, search_path


def cmd_configs(args) -> int:
    if args.group is not None:
        check_group(args.group, "marl configs")
    for group in [args.group] if args.group else GROUPS:
        print(f"{group}:")
        options = group_options(group)
        width = max([28, *map(len, options)])
        for option in options:
            path = option_file(group, option)
            note = _first_comment(path) if path else "the algorithm with its class defaults (marl defaults NAME)"
            print(f"  {option:<{width}} {note}")
    print(f"(searched: {', '.join(str(p) for p in search_path())}; MARL_CONF_PATH adds folders before marl's own)")
    return 0


def _first_comment(path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""
