"""Recurrent Q networks (`model.recurrent: gru|lstm`): encoder -> MLP -> LSTM/GRU -> Q head.
DQN's `RecurrentQ`; VDN/QMIX's `RecurrentJointQ`, one such agent network shared by the group,
mixed as in `JointQModule`.

Replay holds sequences (`marl.replay.sequences`): chunks of at most `max_seq_len` (joint)
steps of one episode, each with the agents' states recorded at its first step
(stored-state replay as in R2D2: the stored state comes from the weights that acted,
which may be a few updates old; `training.burn_in` starts each row earlier to warm it up). The loss runs the agent network
over [obs_0, next_obs_0 .. next_obs_{L-1}] from the stored state: Q(s_t) is output t,
Q(s_{t+1}) output t + 1, for the online and the target network alike.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from marl.modules.catalog import ACTIVATIONS, check_activation, check_hiddens, encoder_for, linear
from marl.modules.joint_q import MIXER_KEYS, mixer_state
from marl.modules.parts import PartsLayout, has_image_parts
from marl.modules.mixers import QMixer, VDNMixer
from marl.modules.q_mlp import MODEL_KEYS as AGENT_KEYS
from marl.modules.q_mlp import QMLP, piecewise_linear
from marl.modules.recurrent import RECURRENT_KEYS, RecurrentCore, recurrent_options
from marl.modules.rl_module import RLModule
from marl.modules.spaces import image_space, observation_part


class _RecurrentAgentQ(RLModule):
    """What DQN's and VDN/QMIX's recurrent Q networks share: encoder -> MLP -> LSTM/GRU -> Q head per agent,
    epsilon-greedy acting like `QMLP`, one step per acting agent (`_step`)."""

    MODEL_KEYS = AGENT_KEYS | RECURRENT_KEYS
    KIND = "Q-model"

    def _check_and_build(self, extra_width: int = 0):
        """Checks the model options and builds encoder, MLP, core and Q head (`extra_width`: features joined
        after the encoder, e.g. the agent id)."""
        cfg = self.model_config
        unknown = set(cfg) - self.MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown {self.KIND} option(s) {sorted(unknown)}; allowed: {sorted(self.MODEL_KEYS)}")
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ValueError(f"Q-learning needs a Discrete action space, got {self.action_space}")
        kind, cell_size, self.max_seq_len = recurrent_options(cfg)
        hiddens = check_hiddens(cfg.get("hiddens", [64]))
        activation = check_activation(cfg.get("activation", "relu"))
        self.encoder = encoder_for(self.observation_space, cfg)
        layers: list[nn.Module] = []
        width = self.encoder.out_dim + extra_width
        for h in hiddens:
            layers += [linear(width, h, 2**0.5), ACTIVATIONS[activation]()]
            width = h
        self.mlp = nn.Sequential(*layers)
        self.core = RecurrentCore(kind, width, cell_size)
        self.q_head = linear(cell_size, self.action_dim, 1.0)
        self.epsilon_schedule = cfg.get("epsilon", [[0, 1.0], [10000, 0.05]])
        self.epsilon = float(piecewise_linear(self.epsilon_schedule, 0))

    def set_exploration_step(self, env_steps: int) -> None:
        self.epsilon = float(piecewise_linear(self.epsilon_schedule, env_steps))

    def get_initial_state(self):
        return self.core.initial_state()

    def _features(self, batch) -> torch.Tensor:
        return self.encoder(batch["obs"])

    def _step(self, batch, epsilon: float):
        x = self._features(batch)
        state = batch.get("state_in") or {n: torch.zeros(len(x), self.core.cell_size) for n in self.core.state_names}
        y, state_out = self.core(self.mlp(x).unsqueeze(1), state)
        q = self.q_head(y.squeeze(1))
        return {"action_dist_inputs": QMLP._greedy_logits(self, q, batch, epsilon), "state_out": state_out}

    def forward_exploration(self, batch):
        with torch.inference_mode():
            return self._step(batch, self.epsilon)

    def forward_inference(self, batch):
        with torch.inference_mode():
            return self._step(batch, 0.0)


class RecurrentQ(_RecurrentAgentQ):
    """DQN's recurrent Q network: encoder -> MLP -> LSTM/GRU -> Q head, epsilon-greedy acting like `QMLP`.

    Replay holds chunks of one agent's steps (`marl.replay.sequences.agent_sequences`)."""

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        self._check_and_build()

    def forward_train(self, batch):
        raise NotImplementedError("RecurrentQ trains through q_sequences (DQN's sequence loss)")

    def q_sequences(self, obs: torch.Tensor, state: dict[str, torch.Tensor], detach_at: torch.Tensor | None = None) -> torch.Tensor:
        """obs [B, T, ...] from states {name: [B, cell]} -> Q values [B, T, actions] (`detach_at`: `RecurrentCore`)."""
        b, t = obs.shape[:2]
        x = self.mlp(self.encoder(obs.reshape((b * t,) + tuple(obs.shape[2:])))).view(b, t, -1)
        y, _ = self.core(x, state, detach_at)
        return self.q_head(y)


class RecurrentJointQ(_RecurrentAgentQ):
    """Per-agent recurrent Q network shared by the group, plus the group's mixer."""

    MODEL_KEYS = AGENT_KEYS | MIXER_KEYS | RECURRENT_KEYS
    KIND = "VDN/QMIX model"

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        cfg = self.model_config
        indices = cfg.get("agent_indices")
        if not indices:
            raise ValueError("RecurrentJointQ needs model.agent_indices; VDNConfig/QMIXConfig fill it in")
        self.n_agents = len(indices)
        self.use_agent_id = bool(cfg.get("agent_id", False))
        place = np.full(max(indices) + 1, -1, dtype=np.int64)
        place[list(indices)] = np.arange(self.n_agents)
        self.register_buffer("group_place", torch.from_numpy(place), persistent=False)
        self._check_and_build(self.n_agents if self.use_agent_id else 0)
        mixer = cfg.get("mixer", "qmix")
        if mixer == "vdn":
            self.mixer = VDNMixer()
        elif mixer == "qmix":
            state_dim = int(cfg.get("state_dim") or self.n_agents * self.obs_dim)
            self.mixer = QMixer(self.n_agents, state_dim, int(cfg.get("mixing_embed_dim", 32)), int(cfg.get("hypernet_embed", 64)))
        else:
            raise ValueError(f"model.mixer must be 'vdn' or 'qmix', got {mixer!r}")
        self.inputs = ("obs", "action_mask", "agent_index") if self.use_agent_id else ("obs", "action_mask")
        image = image_space(observation_space)  # the mixer's state is the group's frames: uint8 scaled as the encoder does
        self.state_scale = 1.0 / 255.0 if image is not None and image.dtype == np.uint8 else 1.0
        obs_part = observation_part(observation_space)
        self.parts = PartsLayout(obs_part) if has_image_parts(obs_part) else None

    # -- acting: one step per acting agent, the agent id joined after the encoder ------------------
    def _features(self, batch) -> torch.Tensor:
        x = self.encoder(batch["obs"])
        if self.use_agent_id:
            place = self.group_place[batch["agent_index"].long()]
            x = torch.cat([x, torch.nn.functional.one_hot(place, self.n_agents).to(x.dtype)], dim=-1)
        return x

    def forward_train(self, batch):
        raise NotImplementedError("RecurrentJointQ trains through agent_q_sequences (the VDN/QMIX sequence loss)")

    # -- learning: sequences of joint steps ----------------------------------------------------
    def agent_q_sequences(self, joint_obs: torch.Tensor, state: dict[str, torch.Tensor],
                          detach_at: torch.Tensor | None = None) -> torch.Tensor:
        """joint_obs [B, T, n, ...] and the agents' states {name: [B, n, cell]} -> Q values [B, T, n, actions]
        (`detach_at` [B]: `RecurrentCore`, the same step for every agent of a row)."""
        b, t, n = joint_obs.shape[:3]
        x = self.encoder(joint_obs.reshape((b * t * n,) + tuple(joint_obs.shape[3:])))
        if self.use_agent_id:
            one_hot = torch.eye(n, dtype=x.dtype).expand(b * t, n, n).reshape(b * t * n, n)
            x = torch.cat([x, one_hot], dim=-1)
        x = self.mlp(x).view(b, t, n, -1).transpose(1, 2).reshape(b * n, t, -1)  # one sequence per (row, agent)
        per_agent = None if detach_at is None else detach_at.repeat_interleave(n)
        y, _ = self.core(x, {k: v.reshape(b * n, -1) for k, v in state.items()}, per_agent)
        return self.q_head(y).view(b, n, t, -1).transpose(1, 2)

    def mix(self, agent_qs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return self.mixer(agent_qs, mixer_state(state, self.parts, self.state_scale))
