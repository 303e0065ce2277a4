"""The live agents of joint rows: what the joint-step losses (VDN, QMIX, MASAC, MADDPG) leave out for dead agents.

`marl.replay.joint` pads a dead agent's place at every step after its death (zero obs, action 0 or a
zero vector) and marks the real places in `alive` [B, n] (at s) and `next_alive` [B, n] (at s', the
bootstrap step). Rows without the columns (per-agent transitions, groups whose agents never die) have
every agent live.
"""

from __future__ import annotations

import torch

from marl.replay.joint import ALIVE, NEXT_ALIVE

__all__ = ["ALIVE", "NEXT_ALIVE", "live_count", "live_masks", "live_mean", "only_live"]


def live_masks(batch: dict) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(alive, next_alive) as bool [B, n] tensors, or None where the batch has no such column (all live)."""
    alive, next_alive = batch.get(ALIVE), batch.get(NEXT_ALIVE)
    return (None if alive is None else alive.bool()), (None if next_alive is None else next_alive.bool())


def only_live(x: torch.Tensor, alive: torch.Tensor | None) -> torch.Tensor:
    """`x` [B, n, ...] with the dead agents' places set to 0. A select, not a product: whatever a padded
    place holds (even inf or nan) reaches neither the result nor the gradient."""
    if alive is None:
        return x
    mask = alive.reshape(alive.shape + (1,) * (x.dim() - alive.dim()))
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))


def live_count(alive: torch.Tensor | None, n: int) -> torch.Tensor | int:
    """Live agents per row [B] (at least 1, so a mean over them never divides by 0); n without a mask."""
    return n if alive is None else alive.sum(-1).clamp(min=1)


def live_mean(x: torch.Tensor, alive: torch.Tensor | None) -> torch.Tensor:
    """The mean of `x` [B, n] over the live agents' places of all rows (over all places without a mask)."""
    if alive is None:
        return x.mean()
    return only_live(x, alive).sum() / alive.sum().clamp(min=1)
