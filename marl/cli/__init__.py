"""The `marl` command, one module per command (`main` builds the parser and runs one)."""

from marl.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
