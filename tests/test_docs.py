"""The docs stay true: the README as a short entry point, the generated scenario reference, the DAG pictures,
the pages' Python examples."""

from __future__ import annotations

import re
from pathlib import Path

from marl.algorithms.reference import scenario_reference

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def _python_blocks(text: str = README) -> list[str]:
    return re.findall(r"```python\n(.*?)\n```", text, re.S)


def _nav_pages() -> list[str]:
    return re.findall(r":\s+(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)


def test_readme_is_a_short_entry_point_whose_links_resolve():
    assert len(README.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#\s]+)[^)]*\)", README)
    assert "docs/concepts.md" in links and "benchmarks/README.md" in links
    for link in links:
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"
    # every page of the site is one link away
    for page in _nav_pages():
        if page not in ("index.md", "api.md") and not page.startswith("results/"):
            assert f"docs/{page}" in links, f"README does not link docs/{page}"


def test_readme_yaml_example_is_the_scenario_file():
    (block,) = re.findall(r"```yaml\n(.*?)```", README, re.S)
    assert block == (ROOT / "scenarios" / "simple_spread_ppo.yaml").read_text()


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (block,) = _python_blocks()
    namespace: dict = {}
    exec(compile(block, "README Python example", "exec"), namespace)
    result = namespace["result"]
    assert result["iteration"] == 1 and result["env_steps_total"] >= 2048
    assert (tmp_path / "ckpt").is_dir() and capsys.readouterr().out.strip()
    # its mapping is a table, saved with the checkpoint: `marl evaluate ckpt` opens it without the Python config
    from marl import Algorithm

    Algorithm.from_checkpoint(tmp_path / "ckpt").stop()


def test_pages_are_their_own_source_and_no_tutorial_is_a_stub():
    for page in _nav_pages():
        text = (DOCS / page).read_text()
        assert "<!-- readme:" not in text, f"docs/{page} still includes a README section"
        if page.startswith("tutorials/"):
            assert len(text.splitlines()) >= 30 and ("```" in text or "![" in text), f"docs/{page} is a stub"


def test_scenario_reference_is_up_to_date():
    on_file = (ROOT / "docs" / "scenario_reference.md").read_text()
    assert on_file == scenario_reference(), (
        "docs/scenario_reference.md is stale: run `python -m marl.algorithms.reference > docs/scenario_reference.md`"
    )


def test_scenario_reference_lists_every_key_with_its_default():
    from marl import PPOConfig

    text = scenario_reference(["PPO"])  # the shared sections plus PPO's training table (`marl reference PPO`)
    for section, values in PPOConfig().to_dict().items():
        if isinstance(values, dict):
            assert f"## `{section}`" in text or f"## `{section}` (PPO)" in text
            for key in values:
                assert re.search(rf"^\| `{key}` \|", text, re.M), f"{section}.{key} missing from the reference"
    assert "| `lr` | float | `0.0003` | >= 0 | Adam learning rate |" in text
    assert "| `checkpoint_frequency` | int | `10` | >= 0 |" in text


def test_dag_pictures_exist():
    from test_cli_surface import assert_real_png

    pictures = re.findall(r"!\[[^\]]*\]\((docs/[^)]+\.png)\)", README)
    pictures += ["docs/" + p for p in re.findall(r"!\[[^\]]*\]\(([^)/]+\.png)\)", (DOCS / "concepts.md").read_text())]
    assert "docs/ppo_workflow.png" in pictures and "docs/dqn_workflow.png" in pictures
    for picture in pictures:
        assert_real_png(ROOT / picture, min_size=(300, 400))


def test_custom_workflow_tutorial_example_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # it draws ppo_clipped.png here
    page = (DOCS / "tutorials" / "custom_operator.md").read_text()
    (block,) = [b for b in _python_blocks(page) if "class ClipRewards" in b]
    namespace: dict = {}
    exec(compile(block, "custom_operator.md", "exec"), namespace)
    algo = namespace["algo"]
    try:
        assert namespace["result"]["iteration"] == 1 and namespace["result"]["env_steps_total"] >= 256
        assert list(algo.workflow.graph.successors("clip")) == ["learn"]
        assert "concat --batch--> clip" in capsys.readouterr().out
        assert (tmp_path / "ppo_clipped.png").stat().st_size > 1000
    finally:
        algo.stop()


def test_custom_workflow_example_file_runs_and_draws(tmp_path):
    import runpy

    from test_cli_surface import assert_real_png

    example = runpy.run_path(str(ROOT / "examples" / "custom_workflow.py"))
    results = example["main"](iterations=2, picture=str(tmp_path / "clipped.png"))
    assert [r["iteration"] for r in results] == [1, 2]
    assert_real_png(tmp_path / "clipped.png")


def test_tune_example_names_real_api():
    page = (DOCS / "tutorials" / "cluster.md").read_text()
    (block,) = [b for b in _python_blocks(page) if "tune.Tuner" in b]
    compile(block, "cluster.md tune example", "exec")
    import marl.tune

    assert "from marl.tune import trainable" in block and callable(marl.tune.trainable)
    assert "training.lr" in block
