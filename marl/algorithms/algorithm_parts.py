"""AlgorithmParts: what an algorithm contributes to the generic learner, per trained policy.

Its own module because it is the learner-side contract (losses, parameter groups, target copies,
minibatching; `marl.learners.param_groups`), read by learners, while `AlgorithmConfig`
(`marl.algorithms.algorithm_config`, which still exports it) is the builder users write.
"""

from __future__ import annotations

from typing import Callable

from marl.config.checks import section_fields
from marl.learners.param_groups import DEFAULT_GROUP, DEFAULT_TARGET, Minibatching, ParamGroup, TargetCopy


class AlgorithmParts:
    """What an algorithm contributes to the generic learner, per trained policy (see `marl.learners.learner`).

    The learner asks for `param_groups`, `target_copies` and `minibatching` (the
    contract, `marl.learners.param_groups`). Their defaults build today's learner from
    the short form: one group `default` over all parameters, trained on `loss` with the
    training section's `lr`, `adam_eps` and `grad_clip`, and one whole-module copy
    named `target` when `uses_target_network`. Override them for several optimisers,
    schedules or sub-network targets.
    """

    loss_columns: tuple[str, ...] = ()  # batch columns the losses read (as tensors)
    uses_target_network = False  # short form: one frozen whole-module copy, `target`
    per_row_stats: tuple[str, ...] = ()  # loss stats returned per row, in batch order (TD errors)

    @staticmethod
    def loss(module, batch, cfg, target=None):
        """The short form's loss term: `target` is the `target` copy (None without one)."""
        raise NotImplementedError

    @staticmethod
    def learner_connectors(cfg) -> list[Callable]:
        return []

    @staticmethod
    def prepare(module, tensors: dict, cfg) -> dict:
        """Columns computed with the current network once per update, before the epochs."""
        return tensors

    # (module, tensors, cfg) -> {name: per-row tensor}: columns computed with the updated network once after the
    # epochs (memoryless modules), returned with the update's stats in batch order (HAPPO: the new log-probs the
    # next agent's update weighs its advantages by); None: none
    finish: Callable | None = None

    def param_groups(self, cfg) -> list[ParamGroup]:
        """The optimisers, in update order; `cfg` is the policy's training section."""
        loss = self.loss

        def default_loss(module, minibatch, cfg, targets):
            return loss(module, minibatch, cfg, target=targets.get(DEFAULT_TARGET))

        return [ParamGroup(DEFAULT_GROUP, default_loss, lr=cfg.lr, eps=cfg.adam_eps, grad_clip=cfg.grad_clip)]

    def update_order(self, groups: list[ParamGroup], rng) -> list[ParamGroup]:
        """The order the trainable groups step in on every minibatch of one update: as declared, unless the
        algorithm draws another each update from the learner's generator `rng` (HASAC: its agents' actors in a
        random order, each loss seeing the actors stepped before it)."""
        return groups

    def target_copies(self, cfg) -> list[TargetCopy]:
        return [TargetCopy(DEFAULT_TARGET)] if self.uses_target_network else []

    def minibatching(self, cfg) -> Minibatching:
        """`num_epochs` and `minibatch_size` of the training section where it declares them; else one step per batch."""
        declared = section_fields(cfg)
        return Minibatching(
            num_epochs=cfg.num_epochs if "num_epochs" in declared else 1,
            minibatch_size=cfg.minibatch_size if "minibatch_size" in declared else None,
        )
