"""DQN's loss (Mnih et al. 2015) with double Q (van Hasselt et al. 2016), n-step targets and PER weights.

    y = R^(n) + gamma^m * (1 - terminated) * Q_target(s', argmax_a Q_online(s', a))
    loss = mean_i( w_i * l(Q_online(s_i, a_i) - y_i) ),  l: squared (default) or Huber (`td_error_loss`)

`discounts` holds gamma^m per transition (m <= n steps were summed into R^(n));
`weights` are prioritised replay's importance weights (1 for uniform replay).
In envs with action masks the argmax over s' ranges over the legal actions there
(`next_action_mask`): an illegal move's Q value is never learned, so it must not
be bootstrapped from.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from marl.data import sample_batch as sb
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS
from marl.replay.sequences import DETACH_AT, SEQ_MASK, STATE_START, state_start_column

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.REWARDS, sb.NEXT_OBS, sb.TERMINATEDS, DISCOUNTS, REPLAY_WEIGHTS, sb.NEXT_ACTION_MASK,
                # a recurrent Q network's sequence rows (marl.replay.sequences)
                SEQ_MASK, state_start_column("h"), state_start_column("c"))


def dqn_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    if SEQ_MASK in batch:
        return recurrent_dqn_loss(module, batch, cfg, target)
    obs, next_obs = batch[sb.OBS], batch[sb.NEXT_OBS]
    n = obs.shape[0]
    # One pass over s and s' together: on small networks the call overhead is the cost.
    q_both = module.q_values(torch.cat([obs, next_obs]))
    q, q_next_online = q_both[:n], q_both[n:].detach()
    q_taken = q.gather(1, batch[sb.ACTIONS].long().unsqueeze(1)).squeeze(1)
    with torch.no_grad():
        q_next_target = target.q_values(next_obs) if target is not None else q_next_online
        chooser = q_next_online if cfg.double_q else q_next_target
        next_action = legal_only(chooser, batch.get(sb.NEXT_ACTION_MASK)).argmax(1, keepdim=True)
        q_next = q_next_target.gather(1, next_action).squeeze(1)
        not_done = 1.0 - batch[sb.TERMINATEDS].float()
        y = batch[sb.REWARDS] + batch[DISCOUNTS] * not_done * q_next
    loss, stats = weighted_td_loss(q_taken, y, batch[REPLAY_WEIGHTS], cfg.td_error_loss)
    return loss, {"loss": loss, "q_mean": q_taken.mean(), **stats}


def legal_only(q: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Q values with illegal actions at -inf, so the max and argmax of a target range over legal moves only.

    A row whose mask is all zeros (the episode terminated there: its target is not used) keeps every action.
    """
    if mask is None:
        return q
    legal = mask > 0.5
    legal = legal | ~legal.any(1, keepdim=True)
    return q.masked_fill(~legal, float("-inf"))


def weighted_td_loss(q: torch.Tensor, y: torch.Tensor, weights: torch.Tensor, kind: str):
    """mean_i(w_i * huber_or_mse(q_i - y_i)), with the target's mean and the TD errors (per row: replay priorities)."""
    td_error = q - y
    if kind == "huber":
        per_row = F.huber_loss(q, y, reduction="none", delta=1.0)
    else:
        per_row = 0.5 * td_error.pow(2)
    loss = (weights * per_row).mean()
    return loss, {"target_mean": y.mean(), "td_error_abs_mean": td_error.abs().mean(), "td_error": td_error.abs().detach()}


def masked_td_loss(q: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor, kind: str):
    """Sequence rows [B, L]: each row's mean TD loss over its real steps (mask 1), weighted per row; padded steps
    count for nothing. The per-row TD error (mean |q - y| over real steps) is the row's replay priority."""
    if kind == "huber":
        per_step = F.huber_loss(q, y, reduction="none", delta=1.0)
    else:
        per_step = 0.5 * (q - y).pow(2)
    valid = mask.sum(1).clamp(min=1.0)
    loss = (weights * (per_step * mask).sum(1) / valid).mean()
    td = (q - y).abs() * mask
    total = mask.sum().clamp(min=1.0)
    return loss, {"target_mean": (y * mask).sum() / total, "td_error_abs_mean": td.sum() / total,
                  "td_error": (td.sum(1) / valid).detach()}


def sequence_targets(rewards, terminateds, mask, q_next, gamma: float, n_step: int = 1) -> torch.Tensor:
    """n-step targets inside sequence rows [B, L]: y_t = sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - done) q_next_{t+m-1}
    with m = min(n_step, real steps left in the sequence), `q_next[t]` the bootstrap value of s_{t+1}. A sequence
    ends its episode piece at most at its last real step (pieces end at terminations), so the window never
    crosses a termination, and near a sequence's end it shortens to the steps there are (as n-step replay does
    at an episode's end)."""
    not_done = 1.0 - terminateds.float()
    if n_step == 1:
        return rewards + gamma * not_done * q_next
    length = mask.shape[1]
    pad = torch.zeros_like(mask[:, :n_step])
    masks = torch.cat([mask, pad], dim=1)
    rs, bootstrap = torch.cat([rewards, pad], dim=1), torch.cat([not_done * q_next, pad], dim=1)
    y = torch.zeros_like(rewards)
    discount = 1.0
    for k in range(n_step):
        here = masks[:, k : k + length]  # step t + k is real
        last = here * (1.0 - masks[:, k + 1 : k + 1 + length]) if k < n_step - 1 else here  # ... and the window's last
        y = y + discount * here * rs[:, k : k + length] + discount * gamma * last * bootstrap[:, k : k + length]
        discount *= gamma
    return y


def recurrent_dqn_loss(module, batch: dict[str, torch.Tensor], cfg, target=None):
    """DQN on sequence rows [B, L, ...] of a recurrent Q network: one pass over [obs_0, next_obs_0 .. next_obs_{L-1}]
    from the stored state gives Q(s_t) (output t) and Q(s_{t+1}) (t + 1); n-step targets within the sequence."""
    obs, next_obs, mask = batch[sb.OBS], batch[sb.NEXT_OBS], batch[SEQ_MASK]
    length = mask.shape[1]
    seq = torch.cat([obs[:, :1], next_obs], dim=1)
    state = {k[len(STATE_START) + 1:]: v for k, v in batch.items() if k.startswith(STATE_START + ".")}
    q_all = module.q_sequences(seq, state, **({"detach_at": batch[DETACH_AT]} if DETACH_AT in batch else {}))
    q, q_next_online = q_all[:, :length], q_all[:, 1:].detach()
    q_taken = q.gather(2, batch[sb.ACTIONS].long().unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        q_next_target = target.q_sequences(seq, state)[:, 1:] if target is not None else q_next_online
        chooser = q_next_online if cfg.double_q else q_next_target
        next_mask = batch.get(sb.NEXT_ACTION_MASK)
        if next_mask is not None:
            chooser = legal_only(chooser.flatten(0, 1), next_mask.flatten(0, 1)).view_as(chooser)
        q_next = q_next_target.gather(2, chooser.argmax(-1, keepdim=True)).squeeze(-1)
        y = sequence_targets(batch[sb.REWARDS], batch[sb.TERMINATEDS], mask, q_next, cfg.gamma, cfg.n_step)
    loss, stats = masked_td_loss(q_taken, y, mask, batch[REPLAY_WEIGHTS], cfg.td_error_loss)
    return loss, {"loss": loss, "q_mean": (q_taken * mask).sum() / mask.sum().clamp(min=1.0), **stats}
