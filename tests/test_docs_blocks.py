"""Every Python block of README.md and docs/ runs as pasted, with budgets shrunk; fragments say so.

A page's Python blocks run in order in one namespace (a later block may use what an earlier one made), in a
fresh working directory with the repo's scenarios/, suites/ and examples/ (the pages run from its root), with every algorithm built from them capped to a few hundred steps an iteration
(`SHRUNK`) and the loops over iterations or epochs cut to one or two (`CUTS`: the exact text replaced, so
a changed page fails here until its cut is updated). A block the line before marks
`<!-- fragment: why -->` (part of a class, a call needing a server) is compiled, not run. A YAML block
marked `<!-- fragment of scenarios/X.yaml -->` is merged into that scenario, which must then build.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import marl
from marl.algorithms.algorithm_config import AlgorithmConfig
from marl.config.compose import Layer, compose
from marl.population.psro import PSRO

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"(?:<!-- (fragment[^>]*?) -->\n)?```(python|yaml)\n(.*?)\n```", re.S)

# (page, text as written, text run): loops over many iterations, epochs or episodes cut to one or two.
CUTS = {
    "docs/tutorials/custom_env.md": [("for _ in range(15):", "for _ in range(2):")],
    "docs/population.md": [("for epoch in range(14):", "for epoch in range(1):")],
    "docs/tutorials/population.md": [("for epoch in range(9):", "for epoch in range(1):")],
}
SHRUNK = {"train_batch_size": 256, "minibatch_size": 128, "num_epochs": 1}  # caps on an algorithm's training keys


def blocks(page: Path, language: str) -> list[tuple[str | None, str]]:
    return [(mark, code) for mark, lang, code in BLOCK.findall(page.read_text()) if lang == language]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


PYTHON_PAGES = [page for page in PAGES if blocks(page, "python")]


@pytest.fixture
def shrunk_budgets(monkeypatch):
    build = AlgorithmConfig.build

    def shrunk(self):
        training = {k: min(getattr(self.training_cfg, k), cap) for k, cap in SHRUNK.items()
                    if isinstance(getattr(self.training_cfg, k, None), int)}
        self.training(**training)
        runners = self.env_runners_cfg
        self.env_runners(num_envs_per_env_runner=min(runners.num_envs_per_env_runner, 2),
                         rollout_fragment_length=min(runners.rollout_fragment_length, 64))
        return build(self)

    monkeypatch.setattr(AlgorithmConfig, "build", shrunk)
    init = PSRO.__init__
    monkeypatch.setattr(PSRO, "__init__", lambda self, config, **kw: init(self, config, **{**kw, "iterations_per_epoch": 1}))


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=_name)
def test_python_blocks_run_as_pasted(page, tmp_path, monkeypatch, shrunk_budgets, capsys):
    monkeypatch.chdir(tmp_path)
    for folder in ("scenarios", "suites", "examples"):  # the pages' commands run from the repo's root
        (tmp_path / folder).symlink_to(ROOT / folder)
    namespace: dict = {"__name__": "__docs__"}
    cuts = CUTS.get(_name(page), [])
    ran = 0
    for i, (mark, code) in enumerate(blocks(page, "python")):
        where = f"{_name(page)} python block {i + 1}"
        if mark:
            assert re.fullmatch(r"fragment: \S.*", mark), f"{where}: say why it is a fragment: <!-- fragment: why -->"
            compile(code, where, "exec")
            continue
        for written, run in cuts:
            code = code.replace(written, run) if written in code else code
        exec(compile(code, where, "exec"), namespace)
        ran += 1
    for written, _ in cuts:
        assert written in page.read_text(), f"{_name(page)} no longer has {written!r}: update CUTS"
    algo = namespace.get("algo")
    if isinstance(algo, marl.Algorithm):
        algo.stop()
    assert ran or all(mark for mark, _ in blocks(page, "python")), _name(page)


FRAGMENTS = [(page, mark, code) for page in PAGES for mark, code in blocks(page, "yaml") if mark and " of " in mark]


def test_yaml_fragments_are_marked_on_the_multi_agent_page():
    assert {(_name(p), m) for p, m, _ in FRAGMENTS} >= {
        ("docs/tutorials/multi_agent.md", "fragment of scenarios/simple_tag_mixed.yaml"),
        ("docs/tutorials/multi_agent.md", "fragment of scenarios/simple_tag_ppo.yaml"),
    }


@pytest.mark.parametrize("page, mark, code", FRAGMENTS, ids=[f"{_name(p)}:{m.split()[-1]}" for p, m, _ in FRAGMENTS])
def test_yaml_fragments_compose_into_their_scenario(page, mark, code):
    scenario = ROOT / mark.split(" of ", 1)[1]
    assert scenario.is_file(), f"{_name(page)}: {mark} names no scenario file"
    composition = compose(scenario)  # the scenario with its defaults: groups, then the fragment on top
    composition.merge(Layer(_name(page), OmegaConf.to_container(OmegaConf.create(code)), {}))
    algo = composition.config().build()  # modules, connectors, graph
    algo.stop()
