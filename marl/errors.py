"""Errors every layer may raise, defined below all of them (so no layer imports upward for one)."""


class ConfigError(ValueError):
    """A scenario or builder value that cannot work; the message names the key."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be written or read; the message names the directory and what is wrong."""


class ClusterError(RuntimeError):
    """A Ray cluster that cannot be joined (refused, unreachable); the message names the address and the fix."""
