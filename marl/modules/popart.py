"""PopArt value normalisation (van Hasselt et al. 2016, "Learning values across many orders of magnitude").

Why: Adam moves each weight by about `lr` per step whatever the scale of the loss, so a value head
regressing on returns of ~100 (CartPole's discounted return) at lr 5e-4 needs thousands of steps to
reach them. Until it does, the advantages track where a row sits in its fragment rather than its
state (APPO on CartPole: explained variance ~0 for 140k env steps). Which algorithms have it on by
default, and where it did not help (Pistonball's shared conv encoder): docs/concepts.md.

With `training.popart` (per policy `model.popart`) the default modules end their value head in a `ValueScale`: the layers
before it learn normalised values y, and V = std * y + mean. It is a 1 -> 1 `nn.Linear` whose weight
is std and bias mean (no gradient): they travel with the weights to runners and into checkpoints, and
the NumPy and JAX acting paths read it as one more linear layer, so every consumer of V (GAE, V-trace,
bootstraps, logged values) sees values in return units as before.

The actor-critic losses call `normalise_value_targets(module, targets)` on each minibatch, before
the forward pass. It
  1. moves the running mean and mean square of the value targets towards the minibatch's
     (exponential averages with weight `BETA` per update, debiased as Adam's moments are);
  2. rescales the layer before the `ValueScale` so that V's outputs are unchanged ("Preserving
     Outputs Precisely"): W <- W std_old / std_new, b <- (std_old b + mean_old - mean_new) / std_new;
  3. returns std, by which the loss divides its value errors: the regression is on normalised
     targets, (V - target) / std = y - (target - mean) / std ("Adaptively Rescaling Targets").
The std is kept at 1 or more, and at 1 % of the targets' root mean square or more (see the bounds below).
Under several learners (DDP) the minibatch moments are summed over ranks first, so every rank
rescales its copy identically.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

BETA = 0.99  # weight of the old moments per update: a time constant of ~100 minibatches
# The paper bounds the scale to [1e-4, 1e6]; here it never goes below 1: PopArt shrinks large targets to unit scale
# but does not blow small ones up. Adam's step of about lr per weight is what makes large targets slow to reach; on
# targets already below 1 a smaller scale only slows V in return units (IMPALA-LSTM on the recall task, returns in
# [0, 1], std ~0.45: greedy recall 0.70 / 0.59 after 30 iterations, against 1.0 / 1.0 without PopArt).
MIN_STD, MAX_STD = 1.0, 1e6
# The std may not fall below this share of the targets' root mean square. Where the policy has solved its task the
# targets become nearly one number (CartPole at 500: V ~ 100 everywhere, std 0.1 and falling at 200k env steps), and
# an unbounded 1 / std blows the value errors up: APPO's gradient norm rose past its clip of 40 (to 114), cutting the
# policy's step with the value's (1 % of ~100 is the floor of 1 above; returns of ~10,000 need this one).
MIN_RELATIVE_STD = 0.01


class ValueScale(nn.Linear):
    """V = std * y + mean, as a frozen 1 -> 1 linear layer (weight std, bias mean), plus the targets' moments."""

    def __init__(self):
        super().__init__(1, 1)
        with torch.no_grad():
            self.weight.fill_(1.0)
            self.bias.zero_()
        self.weight.requires_grad_(False)
        self.bias.requires_grad_(False)
        # (EMA of the mean, EMA of the mean square, EMA of 1: the debiasing weight); in checkpoints with the weights
        self.register_buffer("moments", torch.zeros(3, dtype=torch.float64))

    @property
    def mean(self) -> torch.Tensor:
        return self.bias[0]

    @property
    def std(self) -> torch.Tensor:
        return self.weight[0, 0]

    @torch.no_grad()
    def update(self, targets: torch.Tensor, before: nn.Linear) -> None:
        """Moves the statistics towards `targets` and rescales `before` (the layer feeding this one) to keep V."""
        # A learner calls this once per minibatch: two reductions on the device, then scalar arithmetic in Python
        # (the same float64 operations, in the same order, as tensor ops; a tenth of their dispatch cost).
        t = targets.detach().to(torch.float64).reshape(-1)  # (on the learner's device, as the moments are)
        batch = torch.stack([t.sum(), t.pow(2).sum(), t.new_tensor(float(t.numel()))])
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(batch)
        total, squares, count = batch.tolist()
        if count < 1:
            return
        self.moments.mul_(BETA).add_(self.moments.new_tensor([total / count, squares / count, 1.0]).mul_(1.0 - BETA))
        first, second, weight = self.moments.tolist()
        mean = first / weight
        var = second / weight - mean * mean
        floor = max(MIN_STD, MIN_RELATIVE_STD * math.sqrt(second / weight))
        std = min(max(math.sqrt(max(var, 0.0)), floor), MAX_STD)
        old_mean, old_std = float(self.bias), float(self.weight)
        before.weight.mul_(old_std / std)
        before.bias.copy_(before.bias.to(torch.float64).mul_(old_std).add_(old_mean).sub_(mean).div_(std))
        self.weight.fill_(std)
        self.bias.fill_(mean)


def value_scales(module: nn.Module) -> list[tuple[ValueScale, nn.Linear]]:
    """Each `ValueScale` in `module` with the linear layer before it (in a Sequential ending in it)."""
    found = []
    for seq in module.modules():
        if isinstance(seq, nn.Sequential) and len(seq) >= 2 and isinstance(seq[-1], ValueScale):
            before = seq[-2]
            if not isinstance(before, nn.Linear):
                raise TypeError(f"a ValueScale must follow a linear layer, not {type(before).__name__}")
            found.append((seq[-1], before))
    return found


def normalise_value_targets(module: nn.Module, targets: torch.Tensor) -> float | None:
    """PopArt's update for the minibatch's value targets: the std to divide value errors by (None without PopArt).

    Call it before the forward pass: it rewrites weights in place that the pass's graph would hold."""
    scales = value_scales(module)
    if not scales:
        return None
    if len(scales) > 1:
        raise ValueError(f"{type(module).__name__} has {len(scales)} ValueScale layers; the losses support one value head")
    scale, before = scales[0]
    scale.update(targets, before)
    return float(scale.std)


def scaled_value_head(head: nn.Module, popart: bool) -> nn.Module:
    """`head` (ending in a linear layer with one output) followed by a `ValueScale` when `popart`."""
    if not popart:
        return head
    layers = list(head) if isinstance(head, nn.Sequential) else [head]
    return nn.Sequential(*layers, ValueScale())


def fit_state_saved_without_scales(network: nn.Module, state: dict) -> dict | None:
    """`state` saved before `network` had its `ValueScale` layers (a checkpoint from before `training.popart` was
    on by default, or trained with it off), made to fit: each scale starts as the identity (std 1, mean 0, no
    moments) and the linear layer before it keeps its saved weights, so V is what it was. A recurrent tower's head
    was the bare linear layer then (`head.weight`, now `head.0.weight`). None where the state holds every scale."""
    names = {id(m): n for n, m in network.named_modules()}
    fitted, changed = dict(state), False
    for scale, before in value_scales(network):
        scale_name, before_name = names[id(scale)], names[id(before)]
        if f"{scale_name}.weight" in fitted:
            continue
        parent = scale_name.rsplit(".", 1)[0]
        if f"{before_name}.weight" not in fitted and before_name == f"{parent}.0" and f"{parent}.weight" in fitted:
            for p in ("weight", "bias"):
                fitted[f"{before_name}.{p}"] = fitted.pop(f"{parent}.{p}")
        fitted[f"{scale_name}.weight"] = np.ones((1, 1), np.float32)
        fitted[f"{scale_name}.bias"] = np.zeros(1, np.float32)
        fitted[f"{scale_name}.moments"] = np.zeros(3, np.float64)
        changed = True
    return fitted if changed else None
