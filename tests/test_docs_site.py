"""The documentation site (MkDocs + mkdocstrings) builds with warnings as errors and covers the public API."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.bounds import HANG_S

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="the docs extra (pip install 'marl[docs]') is not installed")
    pytest.importorskip("mkdocstrings", reason="the docs extra (pip install 'marl[docs]') is not installed")
    out = tmp_path_factory.mktemp("site")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=HANG_S, env={"NO_MKDOCS_2_WARNING": "1", **__import__("os").environ})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    assert not re.search(r"^WARNING", p.stderr, re.M), p.stderr[-5000:]
    return out


def test_every_public_name_has_an_api_entry_with_its_docstring(site):
    import inspect

    import marl

    html = (site / "api" / "index.html").read_text()
    for name in marl.__all__:
        obj = getattr(marl, name)
        assert f'id="marl.{name}"' in html, f"marl.{name} has no entry in the API reference"
        # mkdocstrings rendered the object itself (its anchor is where it is defined) with its docstring's first line
        assert f'id="{obj.__module__}.{obj.__qualname__}"' in html, name
        summary = (inspect.getdoc(obj) or "").split("\n")[0]
        if summary:
            words = re.findall(r"[A-Za-z]{4,}", summary)[:3]
            assert all(w in html for w in words), (name, summary)


def test_pages_hold_their_sections_pictures_and_references(site):
    cluster = (site / "tutorials" / "cluster" / "index.html").read_text()
    assert "ray job submit" in cluster and "Tuner" in cluster and "MarlTrainable" in cluster
    concepts = (site / "concepts" / "index.html").read_text()
    assert 'src="../ppo_workflow.png"' in concepts and (site / "ppo_workflow.png").is_file()
    reference = (site / "scenario_reference" / "index.html").read_text()
    assert "mlflow_tracking_uri" in reference and "checkpoint_frequency" in reference
    experiments = (site / "tutorials" / "experiments" / "index.html").read_text()
    assert "marl_eval.json" in experiments and "stratified" in experiments


def test_a_broken_reference_fails_the_build(tmp_path):
    """Warnings are errors: a page naming an object that does not exist stops the build."""
    pytest.importorskip("mkdocstrings", reason="the docs extra (pip install 'marl[docs]') is not installed")
    import shutil

    work = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", work / "docs")
    shutil.copytree(ROOT / "tools", work / "tools")
    shutil.copy(ROOT / "mkdocs.yml", work / "mkdocs.yml")
    (work / "docs" / "api.md").write_text("# API\n\n::: marl.no_such_object\n")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "out")],
                       cwd=work, capture_output=True, text=True, timeout=HANG_S,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode != 0 and "no_such_object" in p.stderr


@pytest.mark.parametrize("page", ["custom_env.md", "custom_module.md"])
def test_tutorial_code_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "tutorials" / page).read_text()
    (block,) = re.findall(r"```python\n(.*?)\n```", text, re.S)
    namespace: dict = {}
    exec(compile(block, page, "exec"), namespace)
    result = namespace["result"]
    if page == "custom_env.md":
        assert result["episode_return_mean"] > 15.0  # random play scores 10 (of 20): the players learnt to agree
    else:
        assert result["env_steps_total"] >= 512 and "losses/default_policy/vf_loss" in result
