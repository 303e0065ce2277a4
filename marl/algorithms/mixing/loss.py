"""The value-decomposition TD loss on joint transitions (VDN and QMIX differ only in the mixer).

    Q_tot(s, u)  = mixer([Q_a(o_a, u_a)]_a, state)
    y            = R^(n) + gamma^m (1 - terminated) * mixer_target([Q_a^target(o'_a, u'_a)]_a, state')
    u'_a         = argmax_u Q_a(o'_a, u)   (double Q: picked online, valued by the target networks)
    loss         = mean_i( w_i * huber_or_mse(Q_tot_i - y_i) )

An agent that has died (`alive` 0 at s, `next_alive` 0 at s': `marl.replay.joint` pads its place) enters
the mixer as Q = 0 in both: VDN's sum leaves it out, QMIX's mixer reads a constant for it, and no gradient
reaches its padded rows. (EPyMARL on SMAC keeps a dead agent's Q at its zero observation and forced no-op
in both, learnt like any other; zeroing it needs no such env convention.)
"""

from __future__ import annotations

import torch

from marl.algorithms.dqn.loss import masked_td_loss, sequence_targets, weighted_td_loss
from marl.algorithms.live_agents import ALIVE, NEXT_ALIVE, live_masks, live_mean, only_live
from marl.data import sample_batch as sb
from marl.replay import DISCOUNTS, REPLAY_WEIGHTS
from marl.replay.joint import NEXT_STATE, STATE
from marl.replay.sequences import DETACH_AT, SEQ_MASK, STATE_START, state_start_column

LOSS_COLUMNS = (sb.OBS, sb.ACTIONS, sb.REWARDS, sb.NEXT_OBS, sb.TERMINATEDS, DISCOUNTS, REPLAY_WEIGHTS, STATE, NEXT_STATE,
                ALIVE, NEXT_ALIVE,
                # recurrent agents' sequence rows (marl.replay.sequences)
                SEQ_MASK, state_start_column("h"), state_start_column("c"))


def mixing_loss(module, batch: dict[str, torch.Tensor], cfg, target=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    if SEQ_MASK in batch:
        return recurrent_mixing_loss(module, batch, cfg, target)
    obs, next_obs = batch[sb.OBS], batch[sb.NEXT_OBS]  # [B, n, obs_dim]
    b = obs.shape[0]
    q_both = module.agent_q_values(torch.cat([obs, next_obs]))  # one pass over s and s'
    q, q_next_online = q_both[:b], q_both[b:].detach()
    alive, next_alive = live_masks(batch)
    q_taken = only_live(q.gather(2, batch[sb.ACTIONS].long().unsqueeze(-1)).squeeze(-1), alive)  # [B, n]
    q_tot = module.mix(q_taken, batch[STATE])
    with torch.no_grad():
        target = target if target is not None else module
        q_next_target = target.agent_q_values(next_obs)
        chooser = q_next_online if cfg.double_q else q_next_target
        next_actions = chooser.argmax(-1, keepdim=True)
        q_next = only_live(q_next_target.gather(2, next_actions).squeeze(-1), next_alive)
        q_tot_next = target.mix(q_next, batch[NEXT_STATE])
        not_done = 1.0 - batch[sb.TERMINATEDS].float()
        y = batch[sb.REWARDS] + batch[DISCOUNTS] * not_done * q_tot_next
    loss, td_stats = weighted_td_loss(q_tot, y, batch[REPLAY_WEIGHTS], cfg.td_error_loss)
    stats = {"loss": loss, "q_tot_mean": q_tot.mean(), "agent_q_mean": live_mean(q_taken, alive), **td_stats}
    return loss, stats


def recurrent_mixing_loss(module, batch: dict[str, torch.Tensor], cfg, target=None):
    """The same TD loss on sequence rows [B, L, ...] of recurrent agents; padded steps (seq_mask 0) count for nothing.

    The agent network runs once over [obs_0, next_obs_0 .. next_obs_{L-1}] from the stored
    state: output t is Q(s_t), output t + 1 is Q(s_{t+1}) (online and target alike).
    """
    obs, next_obs, mask = batch[sb.OBS], batch[sb.NEXT_OBS], batch[SEQ_MASK]
    b, length = mask.shape
    seq = torch.cat([obs[:, :1], next_obs], dim=1)  # [B, L + 1, n, ...]
    state = {k[len(STATE_START) + 1:]: v for k, v in batch.items() if k.startswith(STATE_START + ".")}
    q_all = module.agent_q_sequences(seq, state, **({"detach_at": batch[DETACH_AT]} if DETACH_AT in batch else {}))
    q, q_next_online = q_all[:, :length], q_all[:, 1:].detach()
    alive, next_alive = live_masks(batch)
    q_taken = only_live(q.gather(3, batch[sb.ACTIONS].long().unsqueeze(-1)).squeeze(-1), alive)  # [B, L, n]
    n = q_taken.shape[-1]
    q_tot = module.mix(q_taken.reshape(b * length, n), batch[STATE].reshape(b * length, -1)).view(b, length)
    with torch.no_grad():
        target = target if target is not None else module
        q_next_target = target.agent_q_sequences(seq, state)[:, 1:]
        chooser = q_next_online if cfg.double_q else q_next_target
        q_next = only_live(q_next_target.gather(3, chooser.argmax(-1, keepdim=True)).squeeze(-1), next_alive)
        q_tot_next = target.mix(q_next.reshape(b * length, n), batch[NEXT_STATE].reshape(b * length, -1)).view(b, length)
        y = sequence_targets(batch[sb.REWARDS], batch[sb.TERMINATEDS], mask, q_tot_next, cfg.gamma, cfg.n_step)
    loss, td_stats = masked_td_loss(q_tot, y, mask, batch[REPLAY_WEIGHTS], cfg.td_error_loss)
    stats = {"loss": loss, "q_tot_mean": (q_tot * mask).sum() / mask.sum().clamp(min=1.0), **td_stats}
    return loss, stats
