"""What an algorithm declares for the learner, per trained policy: parameter groups, target copies, minibatching.

    class TwoGroupParts(AlgorithmParts):
        def param_groups(self, cfg):
            return [
                ParamGroup("critic", critic_loss, lr=cfg.critic_lr, eps=cfg.adam_eps, grad_clip=cfg.grad_clip,
                           params=lambda m: m.critic.parameters()),
                ParamGroup("actor", actor_loss, lr=cfg.actor_lr, eps=cfg.adam_eps,
                           params=lambda m: m.actor.parameters(), every=2),  # a delayed actor (TD3)
            ]

        def target_copies(self, cfg):
            return [TargetCopy("critic", of=lambda m: m.critic)]

On every minibatch step the learner updates the groups in declared order (or the order the
algorithm's `update_order` draws for the update: `marl.algorithms.algorithm_parts`), each with
its own loss, zero_grad, backward, gradient clipping and Adam step (so a later group's
loss sees the earlier groups' new weights). A group's `loss(module, minibatch, cfg,
targets) -> (loss, stats)` gets the training section and the policy's target copies by
name. Target copies are frozen; the `update_target` node refreshes every copy of the
policies it names (`Learner.update_target(tau)`: tau 1 copies, tau < 1 is Polyak).
An algorithm that declares none of this gets one group `default` over all parameters
(see `AlgorithmParts.param_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from torch import nn

DEFAULT_GROUP = "default"  # the one group of an algorithm that declares no groups
DEFAULT_TARGET = "target"  # the whole-module copy of `AlgorithmParts.uses_target_network`
ADAM_BETAS = (0.9, 0.999)


def all_parameters(module: nn.Module) -> Iterable[nn.Parameter]:
    return module.parameters()


def whole_module(module: nn.Module) -> nn.Module:
    return module


@dataclass(frozen=True)
class ParamGroup:
    """One optimiser over the parameters it owns, with its own loss term and update schedule."""

    name: str
    loss: Callable  # (module, minibatch: dict[str, Tensor], cfg, targets: dict[str, nn.Module]) -> (loss, stats)
    lr: float
    eps: float
    grad_clip: float | None = None  # max global norm of this group's gradients; None: no clipping
    params: Callable[[nn.Module], Iterable[nn.Parameter]] = all_parameters  # the parameters it owns, in optimiser order
    betas: tuple[float, float] = ADAM_BETAS
    every: int = 1  # step on every k-th minibatch step of the policy (counted across updates)
    trainable: bool = True  # False: frozen (its parameters take no gradient, no optimiser, no loss computed)


@dataclass(frozen=True)
class TargetCopy:
    """A frozen copy of the policy's module or of one of its sub-networks, handed to the losses by name."""

    name: str
    of: Callable[[nn.Module], nn.Module] = whole_module  # the network copied, e.g. `lambda m: m.critic`


@dataclass(frozen=True)
class Minibatching:
    """How one policy's train batch is cut into SGD steps."""

    num_epochs: int = 1  # passes over the batch (shuffled once per pass when there is more than one step)
    minibatch_size: int | None = None  # rows per step; None: the whole batch


def check_declared(policy_id: str, groups: list[ParamGroup], copies: list[TargetCopy]) -> None:
    """One clear line for a bad declaration: no group, a repeated name, a bad schedule."""
    if not groups:
        raise ValueError(f"policy '{policy_id}': the algorithm declares no parameter groups; it needs at least one")
    for kind, names in (("parameter group", [g.name for g in groups]), ("target copy", [c.name for c in copies])):
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"policy '{policy_id}': {kind} names must be unique, {repeated} repeat")
    for g in groups:
        if not isinstance(g.every, int) or g.every < 1:
            raise ValueError(
                f"policy '{policy_id}': parameter group '{g.name}' has every={g.every!r}; it must be an int >= 1"
            )
