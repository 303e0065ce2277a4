"""The Multi-Agent Transformer's network (Wen et al., NeurIPS 2022): an encoder over all agents' observations, a
decoder that emits the agents' actions one after another.

    encoder: tokens o^1..o^n (each agent's observation, read from the global state where it is the agents'
             observations joined) -> self-attention blocks -> representations ô^1..ô^n -> values V(ô^i)
    decoder: position m reads the previous agent's action a^{m-1} (a start token at m = 1) plus ô^m, through
             causally masked self-attention blocks -> the distribution of a^m given ô and a^{1:m-1}

Agents are ordered by their index in `possible_agents`. When acting (`forward_exploration`, `forward_inference`)
the decoder runs autoregressively: agent m's action is drawn (or, greedily, picked) before agent m+1's pass, so
the team's joint action is one sample of prod_m pi(a^m | ô, a^{1:m-1}). When learning (`forward_train`) it is
teacher-forced: every position reads the actions the team took (`TEAM_ACTIONS`, made once per update by
`marl.algorithms.mat.loss.team_actions`). With model option `autoregressive: false` the decoder reads no actions
(the agents' actions are decoded independently given ô: the ablation).

Runners pass one policy's rows of one env step at a time, the agents of each env copy next to each other with
the same global state; rows of one env step are grouped as runs of equal states with distinct agent indices.
The module draws the actions itself, and its distribution (`MATDistribution`) carries them: `action_dist_inputs`
is [the row's conditional distribution's parameters | the action decoded for the row].
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from marl.modules.catalog import check_popart, value_head
from marl.modules.distributions import Categorical, DiagGaussian, Distribution
from marl.modules.rl_module import RLModule

TEAM_ACTIONS = "mat_team_actions"  # per row: every agent's action at the row's env step, encoded ([n, agents, width])
TEAM_PRESENT = "mat_team_present"  # per row: which agents acted at the row's env step ([n, agents], 1 = acted)
MODEL_KEYS = {"embed_dim", "num_heads", "num_blocks", "token_widths", "autoregressive", "initial_log_std", "popart"}


class MATDistribution(Distribution):
    """The row's conditional distribution given the earlier agents' actions, carrying the action decoded for it."""

    def __init__(self, inputs: torch.Tensor, discrete: bool, action_width: int):
        params, self.decoded = inputs[..., :-action_width], inputs[..., -action_width:]
        self.discrete = discrete
        self.base = Categorical(params) if discrete else DiagGaussian(params)

    def _action(self) -> torch.Tensor:
        return self.decoded.squeeze(-1).long() if self.discrete else self.decoded

    def sample(self, generator=None) -> torch.Tensor:
        return self._action()  # (drawn by the decoder, agent after agent)

    def deterministic_sample(self) -> torch.Tensor:
        return self._action()  # (forward_inference decoded greedily)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self.base.logp(actions)

    def logp_numpy(self, actions: np.ndarray) -> np.ndarray:
        return self.base.logp(torch.from_numpy(actions)).numpy()

    def entropy(self) -> torch.Tensor:
        return self.base.entropy()

    def kl(self, other: "MATDistribution") -> torch.Tensor:
        return self.base.kl(other.base)


class Block(nn.Module):
    """A pre-norm transformer block: self-attention over the agents (causal in the decoder), then an MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def act_groups(state: torch.Tensor, agent_index: torch.Tensor) -> torch.Tensor:
    """Each acting row's env step as a group id: a run of rows with equal global states and distinct agents."""
    changed = torch.ones(len(state), dtype=torch.bool)
    if len(state) > 1:
        changed[1:] = (state[1:] != state[:-1]).flatten(1).any(-1)
    groups, group, seen = [], -1, set()
    for new, agent in zip(changed.tolist(), agent_index.tolist()):
        if new or agent in seen:
            group, seen = group + 1, set()
        seen.add(agent)
        groups.append(group)
    return torch.tensor(groups, dtype=torch.long)


class MATModule(RLModule):
    MODEL_KEYS = MODEL_KEYS  # the options it reads (checked before a run starts: marl.modules.build.model_keys)

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        cfg = self.model_config
        unknown = set(cfg) - MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown MAT model option(s) {sorted(unknown)}; allowed: {sorted(MODEL_KEYS)}")
        if not cfg.get("token_widths"):
            raise ValueError("MATModule needs model option 'token_widths' (MATConfig sets them from the env's agents)")
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box)):
            raise ValueError(f"MAT acts in Discrete or Box action spaces, got {action_space}")
        self.inputs = ("obs", "action_mask", "agent_index", "state")
        self.widths = [int(w) for w in cfg["token_widths"]]
        self.num_agents, token = len(self.widths), max(int(w) for w in cfg["token_widths"])
        self.offsets = np.cumsum([0] + self.widths[:-1]).tolist()
        dim, heads, blocks = int(cfg.get("embed_dim", 64)), int(cfg.get("num_heads", 1)), int(cfg.get("num_blocks", 1))
        self.autoregressive = bool(cfg.get("autoregressive", True))
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.num_params = int(action_space.n) if self.discrete else int(np.prod(action_space.shape))
        self.action_width = 1 if self.discrete else self.num_params  # the decoded action's width in the dist inputs
        self.action_code = self.num_params  # one-hot (Discrete) or the action itself (Box), as the decoder reads it
        self.position = nn.Parameter(torch.zeros(self.num_agents, dim))
        self.obs_embed = nn.Sequential(nn.LayerNorm(token), nn.Linear(token, dim), nn.GELU())
        self.encoder = nn.ModuleList(Block(dim, heads) for _ in range(blocks))
        self.encoder_ln = nn.LayerNorm(dim)
        self.vf = value_head(dim, [dim], "relu", check_popart(cfg.get("popart", False)))  # (PopArt: MAT's value normalisation)
        self.start = nn.Parameter(torch.zeros(dim))
        self.action_embed = nn.Sequential(nn.Linear(self.action_code, dim), nn.GELU())
        self.rep_embed = nn.Linear(dim, dim)
        self.decoder = nn.ModuleList(Block(dim, heads) for _ in range(blocks))
        self.decoder_ln = nn.LayerNorm(dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, self.num_params))
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((self.num_params,), float(cfg.get("initial_log_std", 0.0))))
        causal = torch.triu(torch.ones(self.num_agents, self.num_agents, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal", causal, persistent=False)  # True: masked (a later agent)
        self.action_dist = functools.partial(MATDistribution, discrete=self.discrete, action_width=self.action_width)

    # -- the two halves ------------------------------------------------------------------------------------------
    def tokens(self, state: torch.Tensor) -> torch.Tensor:
        """[B, n, token] agents' observations out of the joined-observation state, zero-padded to one width."""
        state = state.float()
        out = state.new_zeros(len(state), self.num_agents, max(self.widths))
        for i, (offset, width) in enumerate(zip(self.offsets, self.widths)):
            out[:, i, :width] = state[:, offset:offset + width]
        return out

    def encode(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(ô [B, n, dim], V(ô) [B, n])."""
        x = self.obs_embed(self.tokens(state)) + self.position
        for block in self.encoder:
            x = block(x)
        reps = self.encoder_ln(x)
        return reps, self.vf(reps).squeeze(-1)

    def decode(self, reps: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """Distribution parameters [B, n, params] at every position, given each position's previous agent's action
        code (`previous` [B, n, code]; position 0's is replaced by the start token)."""
        x = self.action_embed(previous) if self.autoregressive else torch.zeros_like(reps)
        if self.autoregressive:
            x = torch.cat([self.start.expand(len(reps), 1, -1), x[:, 1:]], dim=1)
        x = x + self.rep_embed(reps) + self.position
        for block in self.decoder:
            x = block(x, self.causal)
        return self.head(self.decoder_ln(x))

    def _params(self, logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if not self.discrete:
            return torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        return self.apply_action_mask(logits, {} if mask is None else {"action_mask": mask})

    def encode_actions(self, actions: torch.Tensor) -> torch.Tensor:
        if self.discrete:
            return nn.functional.one_hot(actions.long(), self.num_params).float()
        return actions.float()

    # -- the passes ----------------------------------------------------------------------------------------------
    def forward_train(self, batch):
        """Teacher-forced: each row's position decoded from its env step's team actions. The rows of one env step
        (its agents', wherever the minibatch put them) share the state and the team's actions, so each distinct
        (state, team actions) is encoded and decoded once and every row reads its own position of it: the team's
        pass once, not once per agent (n times the work with n agents)."""
        state = batch["state"]
        team, present = batch[TEAM_ACTIONS].float(), batch[TEAM_PRESENT].float().unsqueeze(-1)
        played = team * present
        key = torch.cat([state.reshape(len(state), -1).float(), played.flatten(1), present.flatten(1)], 1)
        distinct, step = torch.unique(key, dim=0, return_inverse=True)  # row -> its env step among the distinct ones
        first = torch.zeros(len(distinct), dtype=torch.long, device=step.device)
        first.scatter_(0, step, torch.arange(len(step), device=step.device))  # a row of each (any: they are alike)
        reps, values = self.encode(state[first])
        previous = torch.zeros_like(played[first])
        previous[:, 1:] = played[first, :-1]
        index = batch["agent_index"].long()
        params = self._params(self.decode(reps, previous)[step, index], batch.get("action_mask"))
        decoded = batch["actions"].float().reshape(len(state), -1)
        return {"action_dist_inputs": torch.cat([params, decoded], dim=-1), "vf_preds": values[step, index]}

    def _act(self, batch, explore: bool) -> dict:
        """Autoregressive: agent after agent, each drawing (or picking) its action given the earlier ones'."""
        state, index = batch["state"], batch["agent_index"].long()
        group = act_groups(state, index)
        first = torch.nonzero(torch.cat([torch.ones(1, dtype=torch.bool), group[1:] != group[:-1]])).squeeze(-1)
        reps, values = self.encode(state[first])
        n, mask = self.num_agents, batch.get("action_mask")
        masks = None
        if mask is not None:
            masks = torch.ones(len(first), n, mask.shape[-1], dtype=mask.dtype)
            masks[group, index] = mask
        acting = torch.zeros(len(first), n, dtype=torch.bool)
        acting[group, index] = True
        previous = torch.zeros(len(first), n, self.action_code)
        params = torch.zeros(len(first), n, self.num_params * (1 if self.discrete else 2))
        actions = torch.zeros(len(first), n, self.action_width)
        for m in range(n):
            step = self._params(self.decode(reps, previous)[:, m], None if masks is None else masks[:, m])
            dist = self.action_dist(torch.cat([step, torch.zeros(len(step), self.action_width)], -1)).base
            a = dist.sample() if explore else dist.deterministic_sample()
            a = torch.where(acting[:, m].reshape(-1, *([1] * (a.dim() - 1))), a, torch.zeros_like(a))
            params[:, m], actions[:, m] = step, a.float().reshape(len(a), -1)
            if m + 1 < n:
                previous[:, m + 1] = self.encode_actions(a) * acting[:, m].unsqueeze(-1)
        out = {"action_dist_inputs": torch.cat([params[group, index], actions[group, index]], dim=-1)}
        out["vf_preds"] = values[group, index]
        return out

    def forward_exploration(self, batch):
        with torch.inference_mode():
            return self._act(batch, explore=True)

    def forward_inference(self, batch):
        with torch.inference_mode():
            return self._act(batch, explore=False)
