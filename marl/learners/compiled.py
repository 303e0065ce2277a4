"""`learners.compile_loss`: each trainable parameter group's loss through torch.compile, the eager loss where that fails.

The compiled loss is the group's own loss function (the module's training pass and the loss terms), traced by
dynamo on the first minibatch and fused by inductor into C++ kernels; autograd runs its compiled backward, and
zero_grad, the gradient clip and the fused Adam step stay as the learner runs them. On PPO's JaxMARL-sized
simple_spread update (1,536-row minibatches, [64, 64] tanh, one thread) it took a minibatch step from 3.0 ms to
2.2 ms (1.36x; MAPPO 1.38x; 1.24-1.26x at 8,192 rows: `benchmarks/speed/learner_compile.py`, in one process) for
13-19 s of compilation on these CPUs with an empty inductor cache (4 s with a warm one), paid in the first update.
Compiling more of the step measured no faster: the backward pass under compiled autograd, and the clip and Adam
compiled as well (1.33x at 1,536 rows, with 18-31 s of compilation), so only the loss is compiled.

Shapes: a minibatch with a row count not seen before (a batch's shorter last minibatch) makes torch recompile
once, with the row count dynamic (automatic dynamic shapes: 6-10 s here); later sizes reuse that graph. Nothing
is padded or dropped: the updates are the eager ones, to float rounding (fused kernels round differently, so a
compiled run is not bit-identical to an eager one: resume a run with the setting it ran with).

Where compilation fails (no C++ compiler, an op inductor cannot lower, a torch bug), the first call says so in
one warning line and the group runs its eager loss from then on; `compiled_share` reports, per update, whether
every group's loss ran compiled (the learner's `loss_compiled` stat).
"""

from __future__ import annotations

import dataclasses
import logging

import torch

from marl.learners.param_groups import ParamGroup

log = logging.getLogger(__name__)


class CompiledLoss:
    """A group's loss, called as the loss is (`(module, minibatch, cfg, targets) -> (loss, stats)`), through
    torch.compile until compiling fails; then its eager loss. `backend` is torch.compile's (tests pass one)."""

    def __init__(self, loss, where: str, backend="inductor"):
        self.eager = loss
        self.compiled = torch.compile(loss, backend=backend)
        self.where = where  # "policy 'p' group 'g'", for the warning
        self.failed: str | None = None  # why compiling failed, once it has

    def __call__(self, module, minibatch, cfg, targets):
        if self.failed is None:
            try:
                return self.compiled(module, minibatch, cfg, targets)
            except Exception as e:
                # Dynamo or the backend failed (torch.compile imported dynamo: no import here for a learner without
                # it); an error of the loss itself is raised as it is.
                if not isinstance(e, torch._dynamo.exc.TorchDynamoException):
                    raise
                cause = getattr(e, "inner_exception", None) or e.__cause__ or e  # (the backend's own error)
                first = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
                self.failed = f"{type(cause).__name__}: {first}"[:300]
                log.warning("learners.compile_loss: torch.compile of the loss of %s failed (%s); it runs eager",
                            self.where, self.failed)
        return self.eager(module, minibatch, cfg, targets)


def compiled_losses(pid: str, groups: list[ParamGroup], backend="inductor") -> list[ParamGroup]:
    """The groups, each trainable one's loss a CompiledLoss (frozen groups compute no loss)."""
    return [dataclasses.replace(g, loss=CompiledLoss(g.loss, f"policy '{pid}' group '{g.name}'", backend))
            if g.trainable else g for g in groups]


def compiled_share(groups: list[ParamGroup]) -> dict[str, float]:
    """{"loss_compiled": 1.0} where every trainable group's loss is compiled and has not failed, 0.0 where one fell
    back to eager; {} where no loss was compiled (learners.compile_loss off)."""
    losses = [g.loss for g in groups if g.trainable]
    if not any(isinstance(loss, CompiledLoss) for loss in losses):
        return {}
    return {"loss_compiled": float(all(isinstance(loss, CompiledLoss) and loss.failed is None for loss in losses))}
