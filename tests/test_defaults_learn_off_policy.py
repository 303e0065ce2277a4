"""The off-policy, offline and mixed algorithms' half of tests/test_defaults_learn.py (its docstring says what
each run checks): a file of its own so that `--dist loadfile` runs it beside the on-policy half."""

from __future__ import annotations

import pytest

from tests.test_defaults_learn import cases, check_defaults_learn, recordings  # noqa: F401 (recordings: a fixture)


@pytest.mark.slow
@pytest.mark.parametrize("name,task,seed", list(cases(on_policy=False)))
def test_defaults_learn_the_canonical_task(name, task, seed, request):
    check_defaults_learn(name, task, seed, request)
