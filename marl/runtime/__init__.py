"""The runtime: `Algorithm` (builds the runners, learners and workflow graph from a config and runs it),
evaluation runners, resource checks, and the run loop of `marl train` (`run_loop`: run directory, stop
criteria, checkpoints, resume)."""

from marl.runtime.algorithm import Algorithm, workflow_for

__all__ = ["Algorithm", "workflow_for"]
