"""Benchmark suites: `marl experiment SUITE.yaml` runs tasks x algorithms x seeds; `marl report RUNS_DIR` aggregates them."""

from marl.experiment.suite import RunSpec, Suite, load_suite

__all__ = ["RunSpec", "Suite", "load_suite"]
