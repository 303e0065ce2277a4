"""Errors every layer may raise, defined below all of them (so no layer imports upward for one)."""

import difflib


class ConfigError(ValueError):
    """A scenario or builder value that cannot work; the message names the key.

    `key` (dotted: 'training.lr', 'training.model.hiddens'), where the check knows it: the composition
    (`marl.config.compose`) names the file and line, or the command line, that set it."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


class CheckpointError(ValueError):
    """A checkpoint that cannot be written or read; the message names the directory and what is wrong."""


class ClusterError(RuntimeError):
    """A Ray cluster that cannot be joined (refused, unreachable); the message names the address and the fix."""


def unknown_key(dotted: str, allowed, holds: str, error: type = ConfigError) -> ConfigError:
    """The one message for a key that is not allowed, with the nearest allowed one: "unknown key 'multi_agent.self_play.
    pool_sise' (did you mean 'pool_size'?); {holds} [...]" (`holds`: what the allowed keys are, e.g. "valid keys:")."""
    key = dotted.rsplit(".", 1)[-1]
    near = difflib.get_close_matches(str(key), sorted(map(str, allowed)), n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    return error(f"unknown key '{dotted}'{hint}; {holds} {sorted(map(str, allowed))}", key=dotted)
