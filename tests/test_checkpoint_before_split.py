"""A checkpoint and a config.yaml written by main before the algorithms package was split into config/,
checkpoint/ and runtime/ (tests/fixtures/before_split, made by make_checkpoint_before_split.py at e9d9717):
the config loads back to the same data, the checkpoint deploys, and resuming it trains exactly as the old
code went on from there (weights bit for bit, results equal)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml
from safetensors.numpy import load_file

import marl

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "before_split"


def test_the_old_config_yaml_loads_to_the_same_config():
    saved = yaml.safe_load((FIXTURE / "config.yaml").read_text())
    config = marl.load_scenario(FIXTURE / "config.yaml")
    assert type(config).__name__ == "PPOConfig"
    loaded, defaults = config.to_dict(), type(config)().to_dict()
    # Every key the old file holds loads to the same value; keys added since come in at their defaults.
    for section, values in saved.items():
        if isinstance(values, dict):
            assert {k: loaded[section][k] for k in values} == values, section
            added = set(loaded[section]) - set(values)
            assert {k: loaded[section][k] for k in added} == {k: defaults[section][k] for k in added}, section
        else:
            assert loaded[section] == values, section


def test_the_old_checkpoint_deploys():
    module = marl.load_module(FIXTURE / "checkpoint")
    expected = load_file(str(FIXTURE / "expected_weights.safetensors"))
    assert {k.split("/", 1)[1] for k in expected} == set(module.state_dict())


def test_the_old_checkpoint_resumes_bit_identically():
    expected_results = json.loads((FIXTURE / "expected_results.json").read_text())
    algo = marl.Algorithm.from_checkpoint(FIXTURE / "checkpoint")
    try:
        assert algo.iteration == expected_results[0]["iteration"] - 1
        results = [algo.train() for _ in expected_results]
        weights = algo.get_weights()["modules"]
    finally:
        algo.stop()
    for want, got in zip(expected_results, results):
        assert {k: got.get(k) for k in want} == want
    expected = load_file(str(FIXTURE / "expected_weights.safetensors"))
    got = {f"{pid}/{k}": v for pid, w in weights.items() for k, v in w.items()}
    assert got.keys() == expected.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
