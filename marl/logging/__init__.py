"""Run directories and logs."""

from marl.logging.run_dir import RunLogger, make_run_dir

__all__ = ["RunLogger", "make_run_dir"]
