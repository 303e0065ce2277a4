"""The docs stay true: the generated scenario reference, the DAG picture, the README's Python examples."""

from __future__ import annotations

import re
from pathlib import Path

from marl.algorithms.reference import scenario_reference

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)\n```", README, re.S)


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


def test_readme_dag_pictures_exist():
    from test_cli_surface import assert_real_png

    pictures = re.findall(r"!\[[^\]]*\]\((docs/[^)]+\.png)\)", README)
    assert pictures
    for picture in pictures:
        assert_real_png(ROOT / picture, min_size=(300, 400))


def test_readme_custom_workflow_example_runs(capsys):
    (block,) = [b for b in _python_blocks() if "class ClipRewards" in b]
    namespace: dict = {}
    exec(compile(block, "README custom workflow", "exec"), namespace)
    algo = namespace["algo"]
    try:
        assert namespace["result"]["iteration"] == 1 and namespace["result"]["env_steps_total"] >= 256
        assert list(algo.workflow.graph.successors("clip")) == ["learn"]
        assert "concat --batch--> clip" in capsys.readouterr().out
    finally:
        algo.stop()


def test_custom_workflow_example_file_runs_and_draws(tmp_path):
    import runpy

    from test_cli_surface import assert_real_png

    example = runpy.run_path(str(ROOT / "examples" / "custom_workflow.py"))
    results = example["main"](iterations=2, picture=str(tmp_path / "clipped.png"))
    assert [r["iteration"] for r in results] == [1, 2]
    assert_real_png(tmp_path / "clipped.png")


def test_readme_tune_example_names_real_api():
    (block,) = [b for b in _python_blocks() if "tune.Tuner" in b]
    compile(block, "README tune example", "exec")
    import marl.tune

    assert "from marl.tune import trainable" in block and callable(marl.tune.trainable)
    assert "training.lr" in block
