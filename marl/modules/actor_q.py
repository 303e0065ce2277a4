"""ActorQModule: actor(s) plus Q(s, a) critic(s), the module of SAC, TD3, MASAC and MADDPG.

The actor reads one agent's observation and acts:
- stochastic (SAC): Box -> a tanh-squashed Gaussian (`SquashedGaussian`), Discrete -> a categorical;
- deterministic (TD3, MADDPG): Box -> tanh(actor(o)) plus exploration noise whose std follows the
  `exploration_noise` schedule ([[env_step, sigma], ...]) while sampling (`NoisyDeterministic`);
  Discrete (MADDPG only: centralised critics) -> logits, explored by sampling their categorical (the
  Gumbel-max sample whose relaxation trains the actor, `marl.algorithms.maddpg.loss`), argmax at inference.
Box actions live in [-1, 1]; the `unsquash_actions` piece maps them to the env's bounds.

The critics (two with `twin_q`) value a state-action pair. Decentralised (no `agent_indices`):
Q(o, a) of one agent, or for Discrete actions Q(o, .) over all actions. Centralised (MASAC,
MADDPG: `agent_indices` names the group's env agents, filled in by their configs): Q(s, a_1..a_n)
over the joined observations and actions of the group at one env step (`marl.replay.joint`;
Discrete actions as one-hots, `one_hot_actions`), or
with `state_dim` Q(state, a_1..a_n) over the env's global state (`critic_state: global_state`).
A group's agents share one actor (`shared_actor`, with a one-hot of the agent's place in the
group when `agent_id`) or each has its own.

The learner trains three parameter groups (`actor_parameters`, `critic_parameters`, `log_alpha`)
and keeps target copies of `critics` (and of `actors` for the deterministic family).

model options: hiddens, critic_hiddens (default: hiddens), activation, deterministic, twin_q,
exploration_noise, initial_alpha, shared_actor, agent_id, agent_indices, state_dim, dueling (decentralised
Discrete critics: Q = V + A - mean(A), as DQN's dueling head), conv_filters and conv_activation.

Image observations (`marl.modules.catalog`): each actor and each critic reads them through a conv encoder of
its own (`Encoded`: the target copies copy theirs), uint8 end to end until the encoder scales them; a
centralised critic encodes each agent's frame and joins the features. Flat observations keep plain MLPs
(the same parameters as before images were read, so their checkpoints load).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from marl.modules.distributions import Categorical
from marl.modules.catalog import ENCODER_KEYS, check_activation, check_hiddens, encoder_for, is_image, mlp, reads_with_conv
from marl.modules.q_mlp import piecewise_linear
from marl.modules.rl_module import RLModule
from marl.modules.squashed import NoisyDeterministic, SquashedGaussian

MODEL_KEYS = {
    "hiddens", "critic_hiddens", "activation", "deterministic", "twin_q", "exploration_noise", "initial_alpha",
    "shared_actor", "agent_id", "agent_indices", "state_dim", "dueling",
} | ENCODER_KEYS


class Encoded(nn.Module):
    """A conv encoder, then an MLP head: rows [R, *image] (or [R, n, *image]: n frames encoded one by one and
    their features joined), with `extra` [R, k] (agent one-hot, actions) joined after the features."""

    def __init__(self, encoder: nn.Module, frames: int, extra: int, hiddens: list[int], n_out: int, activation: str,
                 out_gain: float):
        super().__init__()
        self.encoder, self.frames = encoder, frames
        self.head = mlp(frames * encoder.out_dim + extra, hiddens, n_out, activation, out_gain=out_gain)

    def forward(self, obs: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        r = obs.shape[0]
        features = self.encoder(obs.reshape(r * self.frames, -1)).reshape(r, -1)
        return self.head(features if extra is None else torch.cat([features, extra], dim=-1))


def apply_net(net: nn.Module, obs: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
    """`net` on rows of observations and extra inputs: an `Encoded` net encodes them first, an MLP reads them flat."""
    if isinstance(net, Encoded):
        return net(obs, extra)
    x = obs.reshape(obs.shape[0], -1)
    return net(x if extra is None else torch.cat([x, extra], dim=-1))


class ActorQModule(RLModule):
    MODEL_KEYS = MODEL_KEYS
    keeps_image_obs = True  # frames arrive uint8 [B, *image]; flat observations as before

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        cfg = self.model_config
        unknown = set(cfg) - MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown actor-critic model option(s) {sorted(unknown)}; allowed: {sorted(MODEL_KEYS)}")
        self.continuous = isinstance(action_space, gym.spaces.Box)
        self.dueling = False
        if not self.continuous and not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"SAC/TD3 need a Box or Discrete action space, got {action_space}")
        self.deterministic = bool(cfg.get("deterministic", False))
        indices = cfg.get("agent_indices")
        self.central = bool(indices)
        self.group_size = len(indices) if indices else 1
        if self.deterministic and not self.continuous and not self.central:
            raise ValueError(f"a deterministic actor over {action_space} needs centralised critics (MADDPG's Gumbel-softmax); "
                             "TD3 is Box only: use SAC for Discrete")
        if self.central and bool(cfg.get("dueling", False)):
            raise ValueError("model.dueling needs per-action critics (SAC's per-agent Discrete critics); "
                             "centralised critics value the joint action: set it to false")
        self.state_dim = cfg.get("state_dim")
        if self.state_dim is not None and not self.central:
            raise ValueError("model.state_dim (critics over the global state) needs centralised critics (agent_indices)")
        self.shared_actor = bool(cfg.get("shared_actor", True))
        self.agent_id = bool(cfg.get("agent_id", False)) and self.shared_actor and self.group_size > 1
        hiddens = check_hiddens(cfg.get("hiddens", [256, 256]))
        critic_hiddens = check_hiddens(cfg.get("critic_hiddens") or hiddens, "critic_hiddens")
        activation = check_activation(cfg.get("activation", "relu"))

        # env agent index -> place in the group (one-hot position, which actor); decentralised: place 0
        place = np.zeros(max(indices) + 1 if indices else 1, dtype=np.int64)
        if indices:
            place[list(indices)] = np.arange(self.group_size)
        self.register_buffer("group_place", torch.from_numpy(place), persistent=False)
        needs_index = self.agent_id or (not self.shared_actor and self.group_size > 1)
        self.inputs = ("obs", "action_mask", "agent_index") if needs_index else ("obs", "action_mask")

        self.act_dim = int(np.prod(action_space.shape)) if self.continuous else int(action_space.n)
        self.images = is_image(observation_space)
        self.obs_rank = len(observation_space.shape) if self.images else 1  # axes of one agent's observation
        conv = reads_with_conv(observation_space, cfg)  # images, and boards (which travel flat) given conv_filters
        encoder = (lambda: encoder_for(observation_space, cfg)) if conv else None
        if not conv:
            encoder_for(observation_space, cfg)  # (conv options are range-checked where unused too)
        one_hot = self.group_size if self.agent_id else 0
        actor_out = self.act_dim * (2 if self.continuous and not self.deterministic else 1)
        n_actors = 1 if self.shared_actor else self.group_size
        self.actors = nn.ModuleList(
            Encoded(encoder(), 1, one_hot, hiddens, actor_out, activation, 0.01) if encoder
            else mlp(self.obs_dim + one_hot, hiddens, actor_out, activation, out_gain=0.01) for _ in range(n_actors))
        frames = 0 if self.state_dim is not None else self.group_size  # the frames a critic encodes per row
        if self.continuous or self.central:  # Q of a (joint) action; Discrete: the agents' one-hots
            seen = self.group_size * self.obs_dim if self.state_dim is None else int(self.state_dim)
            extra, critic_out = self.group_size * self.act_dim, 1
        else:
            # dueling: one value and the advantages; the actions' Q values differ by little next to their
            # common size (CartPole: gaps of ~0.1 on values of ~50), which a separate V head learns apart
            self.dueling = bool(cfg.get("dueling", False))
            seen, extra, critic_out = self.obs_dim, 0, self.act_dim + int(self.dueling)
        twin = bool(cfg.get("twin_q", True))
        self.critics = nn.ModuleList(
            Encoded(encoder(), frames, extra, critic_hiddens, critic_out, activation, 1.0) if encoder and frames
            else mlp(seen + extra, critic_hiddens, critic_out, activation, out_gain=1.0) for _ in range(2 if twin else 1))
        if self.deterministic:
            self.noise_schedule = cfg.get("exploration_noise", [[0, 0.1]])
            piecewise_linear(self.noise_schedule, 0)  # fail early on a malformed schedule
            self.sigma = float(piecewise_linear(self.noise_schedule, 0))
            self.action_dist = NoisyDeterministic if self.continuous else Categorical
        else:
            alpha = float(cfg.get("initial_alpha", 1.0))
            if alpha <= 0:
                raise ValueError(f"model.initial_alpha must be > 0, got {alpha}")
            self.log_alpha = nn.Parameter(torch.tensor(math.log(alpha)))
            self.action_dist = SquashedGaussian if self.continuous else Categorical

    # -- parameter groups -----------------------------------------------------
    def actor_parameters(self):
        return self.actors.parameters()

    def critic_parameters(self):
        return self.critics.parameters()

    # -- acting: one row per agent --------------------------------------------
    def set_exploration_step(self, env_steps: int) -> None:
        if self.deterministic:
            self.sigma = float(piecewise_linear(self.noise_schedule, env_steps))

    def _row_places(self, batch) -> torch.Tensor | None:
        if "agent_index" not in batch:
            return None
        return self.group_place[batch["agent_index"].long()]

    def actor_rows(self, obs: torch.Tensor, places: torch.Tensor | None, actors: nn.ModuleList | None = None) -> torch.Tensor:
        """Raw actor outputs of rows [R, obs_dim] whose agents sit at `places` [R] in the group."""
        actors = self.actors if actors is None else actors
        one_hot = nn.functional.one_hot(places, self.group_size).float() if self.agent_id else None
        if len(actors) == 1:
            return apply_net(actors[0], obs, one_hot)
        # an actor per agent (no one-hot then): each on its own rows only, not on every row and then picked
        # (n times the work with n actors)
        parts = [(rows, apply_net(actor, obs[rows])) for k, actor in enumerate(actors)
                 if (rows := (places == k).nonzero(as_tuple=True)[0]).numel()]
        if sum(len(rows) for rows, _ in parts) != obs.shape[0]:
            raise IndexError(f"actor places {sorted(set(places.tolist()))} beyond the module's {len(actors)} actors")
        if not parts:  # no rows
            return apply_net(actors[0], obs)
        out = parts[0][1].new_empty((obs.shape[0], *parts[0][1].shape[1:]))
        for rows, part in parts:
            out = out.index_copy(0, rows, part)
        return out

    def _dist_inputs(self, raw: torch.Tensor, batch, sigma: float) -> torch.Tensor:
        if self.deterministic and self.continuous:
            action = torch.tanh(raw)
            return torch.cat([action, torch.full_like(action, sigma)], dim=-1)
        if self.continuous:
            return raw
        return self.apply_action_mask(raw, batch)

    def forward_train(self, batch):
        raw = self.actor_rows(batch["obs"], self._row_places(batch))
        return {"action_dist_inputs": self._dist_inputs(raw, batch, self.sigma if self.deterministic else 0.0)}

    def forward_exploration(self, batch):
        with torch.inference_mode():
            raw = self.actor_rows(batch["obs"], self._row_places(batch))
            return {"action_dist_inputs": self._dist_inputs(raw, batch, self.sigma if self.deterministic else 0.0)}

    def forward_inference(self, batch):
        with torch.inference_mode():
            raw = self.actor_rows(batch["obs"], self._row_places(batch))
            return {"action_dist_inputs": self._dist_inputs(raw, batch, 0.0)}

    # -- learning: [B, n, ...] per env step of the group (n = 1 decentralised) --
    def group_actor(self, obs: torch.Tensor, actors: nn.ModuleList | None = None) -> torch.Tensor:
        """Raw actor outputs [B, n, out] of the group's observations [B, n, obs_dim] (agents in group order)."""
        actors = self.actors if actors is None else actors
        b, n = obs.shape[:2]
        if len(actors) > 1:  # an actor per agent (no agent-id one-hot: that is for a shared actor): k's on column k
            return torch.stack([apply_net(actors[k], obs[:, k]) for k in range(n)], dim=1)
        rows = obs.reshape(b * n, *obs.shape[2:])
        if not self.agent_id:  # one actor, no one-hot of the agent's place: the places are not read
            return apply_net(actors[0], rows).view(b, n, -1)
        places = torch.arange(n, device=obs.device).repeat(b)
        return self.actor_rows(rows, places, actors).view(b, n, -1)

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor | None, critics: nn.ModuleList | None = None,
                 state: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Each critic's Q: Box or centralised, obs [B, n, obs_dim] (or the global state [B, state_dim] with
        `state_dim`) and actions [B, n, act_dim] (Discrete: `one_hot_actions`) -> [B]; decentralised Discrete,
        obs [B, 1, obs_dim] -> [B, actions] (actions unused)."""
        critics = self.critics if critics is None else critics
        b = obs.shape[0]
        if self.continuous or self.central:
            if self.state_dim is not None and state is None:
                raise ValueError("critics over the global state (model.state_dim) need the batch's state columns")
            seen = obs if self.state_dim is None else state.reshape(b, -1)
            return [apply_net(critic, seen, actions.reshape(b, -1)).squeeze(-1) for critic in critics]
        outs = [apply_net(critic, obs) for critic in critics]
        if not self.dueling:
            return outs
        return [out[:, :1] + out[:, 1:] - out[:, 1:].mean(-1, keepdim=True) for out in outs]

    def one_hot_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """Discrete actions [B, n] (integers) as the one-hots [B, n, actions] a centralised critic reads."""
        return nn.functional.one_hot(actions.long(), self.act_dim).float()
