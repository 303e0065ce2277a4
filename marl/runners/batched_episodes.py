"""A batched runner's episodes in progress: per world the episode's id, its steps so far and each agent's return
so far; the next id to hand out; and, where a world ended at a step of the fragment, its episode's returns.

Two paths move them, to the same numbers: `after_step` after one step of every world (the step-by-step path),
`after_fragment` after a whole fragment at once (the compiled rollout, `marl.runners.jax_rollout`).
"""

from __future__ import annotations

import torch


class EpisodeCounters:
    """`ids` [W], `lengths` [W], `returns` [W, N] (float64), `next_id`, `ended_returns` [T, W, N] (read where a world
    ended at step t: the episode's per-agent returns; its length is the step index `world.t` there plus one)."""

    def __init__(self, first_id: int, steps: int, worlds: int, agents: int, device):
        self.next_id = first_id
        self.ids = torch.zeros(worlds, dtype=torch.int64, device=device)
        self.lengths = torch.zeros(worlds, dtype=torch.int32, device=device)
        self.returns = torch.zeros((worlds, agents), dtype=torch.float64, device=device)
        self.ended_returns = torch.zeros((steps, worlds, agents), dtype=torch.float64, device=device)

    def start(self) -> None:
        """A fresh episode in every world (after the env's reset)."""
        w = len(self.ids)
        self.ids = self.next_id + torch.arange(w, dtype=torch.int64, device=self.ids.device)
        self.next_id += w
        self.lengths.zero_()
        self.returns.zero_()

    def after_step(self, t: int, rewards: torch.Tensor, done: torch.Tensor, some_ended: bool) -> None:
        """Step t gave `rewards` [W, N]; where `done` [W], the episode ended and the world's next one starts (ids
        handed out in world order)."""
        self.returns += rewards
        self.lengths += 1
        if some_ended:
            self.ended_returns[t] = self.returns
            started = torch.cumsum(done.long(), 0)
            self.ids = torch.where(done, self.next_id + started - 1, self.ids)
            self.next_id += int(started[-1])
            self.lengths.masked_fill_(done, 0)
            self.returns.masked_fill_(done.unsqueeze(1), 0.0)

    def after_fragment(self, world, rewards: torch.Tensor, done: torch.Tensor) -> None:
        """`after_step` over a whole fragment at once (rewards [T, W, N], done [T, W]), with each step's episode id
        and step index written into `world` (its `eps_id`, `t`), as the step-by-step path writes them before each step.

        Per world, `before[t]` is the last step before t that ended an episode (-1: none): from there on the world's
        episode id is the one handed out then (ids in the order the step-by-step path hands them: by step, then
        world), its step index counts from there, and its return is the rewards' running sum since then."""
        steps, w = done.shape
        at = torch.arange(steps).unsqueeze(1).expand(steps, w)
        last_end = torch.where(done, at, -1).cummax(0).values  # the last end at or before t
        before = torch.cat([torch.full((1, w), -1), last_end[:-1]])
        started = before >= 0
        from_here = before.clamp(min=0)
        world.t.copy_(torch.where(started, at - before - 1, self.lengths.unsqueeze(0) + at))
        new_ids = self.next_id + done.reshape(-1).long().cumsum(0).view(steps, w) - 1
        world.eps_id.copy_(torch.where(started, new_ids.gather(0, from_here), self.ids.unsqueeze(0)))
        summed = rewards.double().cumsum(0)  # [T, W, N]
        since = summed.gather(0, from_here.unsqueeze(-1).expand_as(summed))
        running = torch.where(started.unsqueeze(-1), summed - since, summed + self.returns.unsqueeze(0))
        self.ended_returns.copy_(running)
        ended = last_end[-1] >= 0
        self.ids = torch.where(ended, new_ids[last_end[-1].clamp(min=0), torch.arange(w)], self.ids)
        self.lengths = torch.where(ended, steps - 1 - last_end[-1], self.lengths + steps).to(torch.int32)
        self.returns = torch.where(done[-1].unsqueeze(-1), 0.0, running[-1])
        self.next_id += int(done.sum())
