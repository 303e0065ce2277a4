"""Errors every layer may raise, defined below all of them (so no layer imports upward for one)."""


class ConfigError(ValueError):
    """A scenario or builder value that cannot work; the message names the key.

    `key` (dotted: 'training.lr', 'training.model.hiddens'), where the check knows it: the composition
    (`marl.config.compose`) names the file and line, or the command line, that set it."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


class CheckpointError(ValueError):
    """A checkpoint that cannot be written or read; the message names the directory and what is wrong."""
