"""The learner's FusedAdam: bit-identical to torch.optim.Adam(fused=True), state dicts interchangeable."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from marl.learners import adam as adam_mod
from marl.learners.adam import FusedAdam, make_adam
from tests.bounds import HANG_S

pytestmark = pytest.mark.skipif(not adam_mod._fused_kernel_works(), reason="this torch has no fused CPU Adam kernel")


def net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def train(model, optimizer, steps: int, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(32, 5, generator=g)
        loss = model(x).pow(2).mean() + 0.1 * model(x).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_updates_are_bit_identical_to_torch_fused_adam_including_lr_changes():
    ours, theirs = net(0), net(0)
    opt_ours = FusedAdam(ours.parameters(), lr=3e-3, eps=1e-5)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=3e-3, eps=1e-5, fused=True)
    train(ours, opt_ours, 40)
    train(theirs, opt_theirs, 40)
    assert same(ours, theirs)
    for opt in (opt_ours, opt_theirs):  # the learner sets lr and eps through param_groups
        opt.param_groups[0]["lr"], opt.param_groups[0]["eps"] = 1e-3, 1e-7
    train(ours, opt_ours, 20, seed=2)
    train(theirs, opt_theirs, 20, seed=2)
    assert same(ours, theirs)
    mine, torch_sd = opt_ours.state_dict(), opt_theirs.state_dict()
    assert mine["state"].keys() == torch_sd["state"].keys()
    for i, s in mine["state"].items():
        assert s.keys() == torch_sd["state"][i].keys()
        assert all(torch.equal(s[k], torch_sd["state"][i][k]) and s[k].dtype == torch_sd["state"][i][k].dtype for k in s)
    assert mine["param_groups"] == torch_sd["param_groups"]


def test_state_dicts_load_across_implementations_and_training_goes_on_identically():
    # a checkpoint written with torch.optim.Adam resumes in FusedAdam, and the other way round
    for first, second in ((torch.optim.Adam, FusedAdam), (FusedAdam, torch.optim.Adam)):
        kwargs = lambda cls: {"fused": True} if cls is torch.optim.Adam else {}  # noqa: E731
        a, reference = net(0), net(0)
        opt_a = first(a.parameters(), lr=2e-3, eps=1e-6, **kwargs(first))
        opt_ref = torch.optim.Adam(reference.parameters(), lr=2e-3, eps=1e-6, fused=True)
        train(a, opt_a, 15)
        train(reference, opt_ref, 15)
        b = net(5)
        b.load_state_dict(a.state_dict())
        opt_b = second(b.parameters(), lr=9.0, eps=9.0, **kwargs(second))
        opt_b.load_state_dict(opt_a.state_dict())
        assert opt_b.param_groups[0]["lr"] == 2e-3 and opt_b.param_groups[0]["eps"] == 1e-6
        train(b, opt_b, 15, seed=3)
        train(reference, opt_ref, 15, seed=3)
        assert same(b, reference), (first.__name__, second.__name__)


def test_a_state_dict_for_another_module_is_refused_with_the_shapes():
    opt = FusedAdam(net(0).parameters(), lr=1e-3, eps=1e-5)
    other = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    other_opt = FusedAdam(other.parameters(), lr=1e-3, eps=1e-5)
    train(other, other_opt, 1)
    with pytest.raises(ValueError, match=r"exp_avg has shape \(8, 5\), the parameter \(16, 5\)"):
        opt.load_state_dict(other_opt.state_dict())
    with pytest.raises(ValueError, match="holds \\[2\\] parameters"):
        opt.load_state_dict(FusedAdam(torch.nn.Linear(5, 3).parameters(), lr=1e-3, eps=1e-5).state_dict())


def test_parameters_without_gradients_keep_no_state_and_do_not_move():
    model = net(0)
    frozen = model[2]
    frozen.requires_grad_(False)
    opt = make_adam(model.parameters(), lr=1e-2, eps=1e-8)
    before = {k: v.clone() for k, v in frozen.state_dict().items()}
    train(model, opt, 3)
    assert all(torch.equal(before[k], v) for k, v in frozen.state_dict().items())
    assert sorted(opt.state_dict()["state"]) == [0, 1]


def test_building_and_training_a_learner_does_not_import_torch_dynamo():
    """The point of FusedAdam: `torch.optim` would import torch._dynamo (about 1 s) at the first learner build."""
    code = (
        "import sys, marl\n"
        "algo = marl.PPOConfig().environment('CartPole-v1').env_runners(num_envs_per_env_runner=2, rollout_fragment_length=32)"
        ".training(train_batch_size=64, minibatch_size=32, num_epochs=1).build()\n"
        "algo.train(); algo.stop()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
