"""`marl envs`: the env families and names this installation can make."""

from __future__ import annotations

from marl.cli.scenario_args import import_modules_of
from marl.envs.catalog import env_catalog


def cmd_envs(args) -> int:
    import_modules_of(args)  # modules that call marl.register_env when imported
    catalog = env_catalog([args.family] if args.family else None)
    for kind in catalog:
        print(f"{kind}:")
        for family, names in catalog[kind].items():
            if isinstance(names, str):
                print(f"  {family}: {names}")
            else:
                print(f"  {family} ({len(names)}): {', '.join(names) if names else '-'}")
    if not args.family or args.family == "registered":
        print("(registered names exist per process: pass --import MODULE for modules that call marl.register_env)")
    return 0
