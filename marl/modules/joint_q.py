"""JointQModule: per-agent Q network (shared by a group's agents) plus the group's mixing network.

Acting is decentralised: each agent picks epsilon-greedily from its own Q
values (the agent network is a `QMLP`, so exploration and masks work as in
DQN). The mixer only runs in the learner, on joint transitions (one row per
env step holding every group agent; see `marl.replay.joint`).

model options: those of QMLP (hiddens, activation, dueling, epsilon), plus
  mixer: "vdn" or "qmix";  mixing_embed_dim, hypernet_embed (QMIX sizes);
  agent_id: append a one-hot of the agent's place in its group to its observation;
  agent_indices, state_dim: the group's env agent indices and global-state
  size (filled in by the VDN/QMIX configs, not by users).

Image observations: the agent network has a conv encoder (`marl.modules.catalog`), the
agent id is joined after it, and the mixer's state (the group's frames, flattened, uint8
in replay) is scaled to [0, 1] like the frames.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from marl.modules.mixers import QMixer, VDNMixer
from marl.modules.q_mlp import MODEL_KEYS as AGENT_KEYS
from marl.modules.q_mlp import QMLP
from marl.modules.rl_module import RLModule
from marl.modules.parts import PartsLayout, has_image_parts
from marl.modules.spaces import image_space, observation_part

MIXER_KEYS = {"mixer", "mixing_embed_dim", "hypernet_embed", "agent_id", "agent_indices", "state_dim"}


def mixer_state(state: torch.Tensor, parts: PartsLayout | None, scale: float) -> torch.Tensor:
    """The mixer's float input from the group's observations as replay holds them: uint8 frames scaled to [0, 1],
    packed Dict/Tuple rows unpacked (`parts`), flat floats as they are."""
    if parts is not None:
        lead = state.shape[:-1]
        return parts.to_float(state.reshape(-1, parts.nbytes)).reshape(lead + (-1,))
    if not state.is_floating_point():  # the group's uint8 frames, flattened
        return state.float() * scale
    return state


class JointQModule(RLModule):
    MODEL_KEYS = AGENT_KEYS | MIXER_KEYS
    keeps_image_obs = True

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        cfg = self.model_config
        unknown = set(cfg) - AGENT_KEYS - MIXER_KEYS
        if unknown:
            raise ValueError(f"unknown VDN/QMIX model option(s) {sorted(unknown)}; allowed: {sorted(AGENT_KEYS | MIXER_KEYS)}")
        indices = cfg.get("agent_indices")
        if not indices:
            raise ValueError("JointQModule needs model.agent_indices (the group's env agent indices); VDNConfig/QMIXConfig fill it in")
        self.n_agents = len(indices)
        self.use_agent_id = bool(cfg.get("agent_id", False))
        # env agent index -> place in the group (the one-hot's position); -1 for agents outside it
        place = np.full(max(indices) + 1, -1, dtype=np.int64)
        place[list(indices)] = np.arange(self.n_agents)
        self.register_buffer("group_place", torch.from_numpy(place), persistent=False)
        agent_cfg = {k: v for k, v in cfg.items() if k in AGENT_KEYS}
        image = image_space(observation_space)
        # Dict/Tuple observations with image parts arrive packed (marl.modules.parts): agents encode them per part
        # like frames, and the mixer reads the group's packed rows unpacked to floats.
        self.parts = PartsLayout(observation_part(observation_space)) if has_image_parts(observation_part(observation_space)) else None
        self.image = image is not None or self.parts is not None
        self.state_scale = 1.0 / 255.0 if image is not None and image.dtype == np.uint8 else 1.0
        if self.image:  # the id joins the encoded frame (a one-hot cannot join pixels)
            ids = self.n_agents if self.use_agent_id else 0
            self.agent = QMLP(observation_space, action_space, agent_cfg, extra_inputs=ids)
        else:
            agent_obs = self.obs_dim + (self.n_agents if self.use_agent_id else 0)
            agent_space = gym.spaces.Box(-np.inf, np.inf, (agent_obs,), np.float32)
            self.agent = QMLP(agent_space, action_space, agent_cfg)
        kind = cfg.get("mixer", "qmix")
        if kind == "vdn":
            self.mixer = VDNMixer()
        elif kind == "qmix":
            state_dim = int(cfg.get("state_dim") or self.n_agents * self.obs_dim)
            self.mixer = QMixer(self.n_agents, state_dim, int(cfg.get("mixing_embed_dim", 32)), int(cfg.get("hypernet_embed", 64)))
        else:
            raise ValueError(f"model.mixer must be 'vdn' or 'qmix', got {kind!r}")
        self.inputs = ("obs", "action_mask", "agent_index") if self.use_agent_id else ("obs", "action_mask")

    @property
    def epsilon(self) -> float:
        return self.agent.epsilon

    def set_exploration_step(self, env_steps: int) -> None:
        self.agent.set_exploration_step(env_steps)

    def _one_hot(self, agent_index: torch.Tensor | None) -> torch.Tensor:
        if agent_index is None:
            raise ValueError("this module appends agent ids: its inputs need an `agent_index` column")
        return torch.nn.functional.one_hot(self.group_place[agent_index.long()], self.n_agents).float()

    def _with_id(self, obs: torch.Tensor, agent_index: torch.Tensor | None) -> torch.Tensor:
        if not self.use_agent_id:
            return obs
        return torch.cat([obs, self._one_hot(agent_index).to(obs.dtype)], dim=-1)

    def agent_q_values(self, joint_obs: torch.Tensor) -> torch.Tensor:
        """Joint obs [B, n, obs_dim] (or [B, n, *image]; agents in group order) -> Q values [B, n, actions]."""
        b, n = joint_obs.shape[:2]
        if self.image:
            ids = torch.eye(n).expand(b, n, n).reshape(b * n, n) if self.use_agent_id else None
            return self.agent.q_values(joint_obs.reshape((b * n,) + joint_obs.shape[2:]), extra=ids).view(b, n, -1)
        if self.use_agent_id:
            one_hot = torch.eye(n, dtype=joint_obs.dtype).expand(b, n, n)
            joint_obs = torch.cat([joint_obs, one_hot], dim=-1)
        return self.agent.q_values(joint_obs.reshape(b * n, -1)).view(b, n, -1)

    def mix(self, agent_qs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return self.mixer(agent_qs, mixer_state(state, self.parts, self.state_scale))

    def _agent_batch(self, batch):
        if self.image:
            out = {"obs": batch["obs"]}
            if self.use_agent_id:
                out["extra_features"] = self._one_hot(batch.get("agent_index"))
        else:
            out = {"obs": self._with_id(batch["obs"], batch.get("agent_index"))}
        if "action_mask" in batch:
            out["action_mask"] = batch["action_mask"]
        return out

    def forward_train(self, batch):
        return {"q_values": self.agent_q_values(batch["obs"])}

    def forward_exploration(self, batch):
        return self.agent.forward_exploration(self._agent_batch(batch))

    def forward_inference(self, batch):
        return self.agent.forward_inference(self._agent_batch(batch))
