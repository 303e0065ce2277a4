"""Mixing networks of value decomposition: per-agent Q values -> one team Q value.

VDN (Sunehag et al. 2018):  Q_tot = sum_a Q_a.
QMIX (Rashid et al. 2018):  Q_tot = w2(s) . elu(W1(s) q + b1(s)) + b2(s), where
hypernetworks read the global state s and produce W1 and w2; taking their
absolute value keeps every mixing weight >= 0, so dQ_tot/dQ_a >= 0
(monotonic): each agent's greedy action is also the greedy joint action.
"""

from __future__ import annotations

import torch
from torch import nn


class VDNMixer(nn.Module):
    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        """agent_qs [B, n] -> [B]."""
        return agent_qs.sum(dim=-1)


class QMixer(nn.Module):
    def __init__(self, n_agents: int, state_dim: int, embed_dim: int = 32, hypernet_embed: int = 64):
        super().__init__()
        self.n_agents, self.embed_dim = int(n_agents), int(embed_dim)
        self.hyper_w1 = nn.Sequential(nn.Linear(state_dim, hypernet_embed), nn.ReLU(), nn.Linear(hypernet_embed, n_agents * embed_dim))
        self.hyper_b1 = nn.Linear(state_dim, embed_dim)
        self.hyper_w2 = nn.Sequential(nn.Linear(state_dim, hypernet_embed), nn.ReLU(), nn.Linear(hypernet_embed, embed_dim))
        # The final bias is a state value V(s): it needs no monotonicity, so it may be any function of s.
        self.value = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    def mixing_weights(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The (non-negative) weights of both mixing layers: [B, n, embed] and [B, embed, 1]."""
        w1 = self.hyper_w1(state).abs().view(-1, self.n_agents, self.embed_dim)
        w2 = self.hyper_w2(state).abs().view(-1, self.embed_dim, 1)
        return w1, w2

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """agent_qs [B, n], state [B, state_dim] -> [B]."""
        w1, w2 = self.mixing_weights(state)
        b1 = self.hyper_b1(state).unsqueeze(1)
        hidden = torch.nn.functional.elu(torch.bmm(agent_qs.unsqueeze(1), w1) + b1)  # [B, 1, embed]
        return (torch.bmm(hidden, w2).squeeze(-1) + self.value(state)).squeeze(-1)
