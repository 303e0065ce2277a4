"""The model catalog: the pieces default modules are made of, reusable by a user's own module.

    obs -> encoder (from the observation space) -> core (memoryless: identity) -> heads

Encoders (`encoder_for(space, model_config)`), chosen from the observation space:

- flat Box, Discrete, MultiDiscrete, MultiBinary: `FlatEncoder`, no weights (the
  env->module pipeline already made the flat float32 vector; Discrete is one-hot there);
- image: a Box with 3 axes, (H, W, C) or (C, H, W) (`marl.modules.spaces.image_layout`), of
  uint8 pixels or float feature maps, or a uint8 Box with 2 axes (a grey frame, seen as (H, W, 1));
  a Box with 3 axes of another dtype (an integer-coded board: Connect Four's 6x7x2 int8 planes) only where
  `conv_filters` is set (`reads_with_conv`; it travels as a flat float32 vector, reshaped and read unscaled),
  else flat: `ConvEncoder` — `conv_filters` ([[out_channels, kernel, stride], ...], valid
  padding), `conv_activation`, then flattened; uint8 images are scaled to [0, 1]
  inside the encoder (they travel as uint8). Default stack by the image's smaller side:
  >= 64 px: [[32, 8, 4], [64, 4, 2], [64, 3, 1]] (the Nature DQN stack, for 84x84);
  24-63 px: [[16, 4, 2], [32, 4, 2], [32, 3, 1]]; under 24 px (grid maps): [[16, 3, 1], [32, 3, 2]];
- Dict / Tuple: `PartsEncoder`, one encoder per part (by these rules), outputs concatenated.

Cores (`core_for`): the slot between encoder and heads; memoryless modules get
`IdentityCore`; with `model.recurrent` set the default actor-critics are built as their
recurrent variants (`marl.modules.recurrent`: encoder -> MLP -> `RecurrentCore` -> head). Heads (`policy_head`, `value_head`, `q_trunk`/`q_head`): MLPs with
orthogonal init (policy outputs small: a near-uniform start). Each piece has `out_dim`.

A user's module reuses them::

    class MyModule(RLModule):
        keeps_image_obs = True  # image observations arrive as uint8 [B, H, W, C], not flattened
        def __init__(self, observation_space, action_space, model_config=None):
            super().__init__(observation_space, action_space, model_config)
            self.encoder = encoder_for(observation_space, self.model_config)
            self.pi = policy_head(self.encoder.out_dim, [128], action_space, "relu")
            self.vf = value_head(self.encoder.out_dim, [128], "relu")
        def forward_train(self, batch):
            h = self.encoder(batch["obs"])
            return {"action_dist_inputs": self.pi(h), "vf_preds": self.vf(h).squeeze(-1)}
"""

from __future__ import annotations

import logging

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from marl.modules.activations import Tanh
from marl.modules.spaces import as_image_box, image_layout, image_shape, observation_part
from marl.modules.parts import PartsLayout
from marl.modules.popart import scaled_value_head

log = logging.getLogger(__name__)
_WARNED_FLAT: set[tuple] = set()  # observation shapes already told that their conv options go unused

ACTIVATIONS = {"tanh": Tanh, "relu": nn.ReLU, "elu": nn.ELU, "silu": nn.SiLU}
ENCODER_KEYS = {"conv_filters", "conv_activation"}

# The model options of the default modules (`training.model`, per policy `multi_agent.policies.<pid>.model`):
# key, type, default, allowed, meaning. The scenario reference prints this table.
MODEL_OPTIONS = [
    ("hiddens", "list of int", "the algorithm's `training.model`", "widths >= 1",
     "hidden layers of each head (policy, value; the Q trunk), after the encoder"),
    ("activation", "str", "`tanh` (actor-critic), `relu` (Q)", ", ".join(f"`{a}`" for a in ACTIVATIONS),
     "activation of the head layers"),
    ("conv_filters", "list or None", "`null`", "`[[out_channels, kernel, stride], ...]`, integers >= 1, leaving >= 1x1",
     "conv stack of image encoders (valid padding); set, it also reads a Box of 3 axes that is no image (an integer-coded "
     "board, e.g. Connect Four's 6x7x2 int8 planes, as float values, unscaled), which is read flat without it; "
     "`null`: by the image's smaller side, >= 64 px "
     "`[[32, 8, 4], [64, 4, 2], [64, 3, 1]]`, 24-63 px `[[16, 4, 2], [32, 4, 2], [32, 3, 1]]`, "
     "smaller `[[16, 3, 1], [32, 3, 2]]`"),
    ("conv_activation", "str", "`relu`", ", ".join(f"`{a}`" for a in ACTIVATIONS), "activation after each conv layer"),
    ("initial_log_std", "float", "`0.0`", "", "Box actions: initial log std of the Gaussian policy"),
    ("value_function", "bool", "`true`", "", "actor-critic: false builds a policy-only network (PG)"),
    ("popart", "bool", "`training.popart` (PPO, MAPPO, APPO, IMPALA, A2C)", "",
     "actor-critic: PopArt value normalisation (`marl.modules.popart`): the value head learns normalised returns, "
     "rescaled as their running mean and std move; the loss regresses on normalised targets"),
    ("critic_hiddens", "list of int or None", "`null`", "widths >= 1", "MAPPO: the centralised critic's layers; null: hiddens"),
    ("recurrent", "str or None", "`null`", "`lstm`, `gru`, `null`",
     "a recurrent core (`marl.modules.recurrent`) in the actor-critic (PPO, APPO, IMPALA, A2C, PG) and MAPPO modules "
     "(encoder -> hiddens -> LSTM/GRU -> head, separate for actor and critic; the learner trains on sequences) and in "
     "DQN's Q network and VDN/QMIX agents (`marl.modules.recurrent_q`, sequence replay with stored states, n-step "
     "targets inside each chunk); "
     "null: memoryless"),
    ("cell_size", "int", "`64`", ">= 1", "hidden size of the recurrent core"),
    ("max_seq_len", "int", "`20`", ">= 1",
     "the learner cuts each agent's trajectory pieces into chunks of at most this many steps (minibatches of whole chunks, "
     "zero-padded inside the module; each chunk starts from the state recorded at its first step, and runners store the "
     "state only there); DQN/VDN/QMIX replay chunks of this many (joint) steps"),
    ("dueling", "bool", "`true`", "", "DQN family: dueling Q head"),
    ("layer_norm", "bool", "`false` (`true`: PQN, PQN_VDN)", "",
     "DQN family: a LayerNorm after each hidden layer of the Q trunk, before its activation"),
    ("epsilon", "list", "`[[0, 1.0], [10000, 0.05]]`", "`[[env_step, eps], ...]`", "DQN family: epsilon-greedy schedule"),
]
MODEL_INTRO = (
    "What the default modules are built from (`marl.modules.catalog`): an encoder chosen from the "
    "observation space (flat vectors as they are, Discrete one-hot; images — a Box of (H, W, C) or "
    "(C, H, W) of uint8 pixels or float maps, or a uint8 grey frame of 2 axes — a conv encoder, uint8 "
    "scaled to [0, 1] inside the module; a board of 3 axes of integers (Connect Four's) too where `conv_filters` is "
    "set, else flat; "
    "Dict/Tuple with images: one encoder per part, concatenated), "
    "then the heads. Set in `training.model`, per policy in `multi_agent.policies.<pid>.model` "
    "(over the former), or `PPOConfig().training(model={...})`; an unknown option is rejected."
)


# -- MLP building blocks ---------------------------------------------------------------
def linear(n_in: int, n_out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(n_in: int, hiddens: list[int], n_out: int, activation: str, out_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hiddens:
        layers += [linear(n_in, width, np.sqrt(2)), ACTIVATIONS[activation]()]
        n_in = width
    layers.append(linear(n_in, n_out, out_gain))
    return nn.Sequential(*layers)


def check_hiddens(value, key: str = "hiddens") -> list[int]:
    if not isinstance(value, (list, tuple)) or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in value):
        raise ValueError(f"model.{key} must be a list of layer widths (integers >= 1), got {value!r}")
    return [int(h) for h in value]


def check_activation(value, key: str = "activation") -> str:
    if value not in ACTIVATIONS:
        raise ValueError(f"model.{key} '{value}' is not one of {sorted(ACTIVATIONS)}")
    return value


# -- encoders --------------------------------------------------------------------------
class FlatEncoder(nn.Module):
    """Flat observations as they are (the pipeline flattened them): no weights."""

    def __init__(self, dim: int):
        super().__init__()
        self.out_dim = int(dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.reshape(len(obs), self.out_dim).float()


def default_conv_filters(shape: tuple, layout: str) -> list[list[int]]:
    """A conv stack that fits the image: Atari's from 64 px, smaller kernels and strides below, down to grids of a
    few cells (Overcooked's 5x4 layouts: 2x2 kernels at stride 1; a 1x1 grid: a 1x1 conv over its channels)."""
    h, w = (shape[0], shape[1]) if layout == "HWC" else (shape[1], shape[2])
    side = min(h, w)
    if side >= 64:
        return [[32, 8, 4], [64, 4, 2], [64, 3, 1]]
    if side >= 24:
        return [[16, 4, 2], [32, 4, 2], [32, 3, 1]]
    if side >= 5:
        return [[16, 3, 1], [32, 3, 2]]
    if side >= 3:
        return [[32, 2, 1], [64, 2, 1]]
    return [[32, side, 1]]


def check_conv_filters(value) -> list[list[int]]:
    ok = isinstance(value, (list, tuple)) and len(value) > 0 and all(
        isinstance(f, (list, tuple)) and len(f) == 3 and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in f)
        for f in value
    )
    if not ok:
        raise ValueError(f"model.conv_filters must be a non-empty list of [out_channels, kernel, stride] (integers >= 1), got {value!r}")
    return [[int(n) for n in f] for f in value]


class ConvEncoder(nn.Module):
    """Conv stack over one image space; input [B, *shape] (or flat [B, prod(shape)]), output [B, out_dim]."""

    def __init__(self, space: gym.spaces.Box, conv_filters=None, activation: str = "relu"):
        super().__init__()
        space = as_image_box(space)
        self.shape = tuple(int(n) for n in space.shape)
        self.layout = image_layout(self.shape)
        self.scale = 1.0 / 255.0 if space.dtype == np.uint8 else None  # uint8 frames: [0, 255] -> [0, 1] here
        filters = default_conv_filters(self.shape, self.layout) if conv_filters is None else check_conv_filters(conv_filters)
        channels, h, w = (self.shape[2], self.shape[0], self.shape[1]) if self.layout == "HWC" else self.shape
        layers: list[nn.Module] = []
        for i, (out_channels, kernel, stride) in enumerate(filters):
            h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
            if h < 1 or w < 1:
                raise ValueError(
                    f"model.conv_filters {filters}: layer {i} ([{out_channels}, {kernel}, {stride}]) leaves nothing of "
                    f"the {self.shape} observation ({self.layout}); use smaller kernels or strides"
                )
            conv = nn.Conv2d(channels, out_channels, kernel, stride)
            nn.init.orthogonal_(conv.weight, np.sqrt(2))
            nn.init.zeros_(conv.bias)
            layers += [conv, ACTIVATIONS[check_activation(activation, "conv_activation")]()]
            channels = out_channels
        self.convs = nn.Sequential(*layers)
        self.out_dim = channels * h * w

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape((len(obs),) + self.shape)
        x = x.float() if self.scale is None else x.float() * self.scale
        if self.layout == "HWC":
            x = x.permute(0, 3, 1, 2)
        return self.convs(x).flatten(1)


class FramesEncoder(nn.Module):
    """A global state of `count` agents' frames joined (MAPPO's state where the env has no state()): each frame through
    one shared conv stack, the features joined in agent order. Input [B, count * prod(frame)] raw (uint8 or its float
    values), output [B, count * conv features]."""

    def __init__(self, state_dim: int, frame, conv_filters=None, activation: str = "relu"):
        super().__init__()
        self.frame = tuple(int(n) for n in frame)
        per = int(np.prod(self.frame))
        if state_dim % per:
            raise ValueError(f"model option state_frame {list(self.frame)} does not divide the state's {state_dim} values")
        self.count = state_dim // per
        self.conv = ConvEncoder(gym.spaces.Box(0, 255, self.frame, np.uint8), conv_filters, activation)
        self.out_dim = self.count * self.conv.out_dim

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.conv(state.reshape(len(state) * self.count, -1)).reshape(len(state), self.out_dim)


def state_encoder(state_dim: int, cfg: dict) -> nn.Module:
    """The critic's encoder of the global state: `FramesEncoder` where `state_frame` says it is frames, else flat."""
    frame = cfg.get("state_frame")
    if not frame:
        return FlatEncoder(state_dim)
    return FramesEncoder(state_dim, frame, cfg.get("conv_filters"), cfg.get("conv_activation", "relu"))


class PartsEncoder(nn.Module):
    """Dict/Tuple spaces with image parts: one encoder per part (conv for images, the flat vector for the rest,
    Discrete one-hot), concatenated in part order.

    Reads the packed uint8 rows the env->module pipeline makes of such observations (`marl.modules.parts`:
    images stay uint8 through runners, batches and replay); a float vector in gymnasium's flatten order
    (what `gym.spaces.flatten` gives) is read too."""

    def __init__(self, space: gym.spaces.Dict | gym.spaces.Tuple, model_config: dict):
        super().__init__()

        self.layout = PartsLayout(space)
        self.parts = nn.ModuleList(encoder_for(leaf, model_config) for _, leaf, _ in self.layout.leaves)
        self.flat_widths = [int(gym.spaces.flatdim(leaf)) for _, leaf, _ in self.layout.leaves]
        self.out_dim = sum(e.out_dim for e in self.parts)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(len(obs), -1)
        if x.dtype != torch.uint8 and x.shape[1] == self.layout.nbytes != sum(self.flat_widths):
            x = x.to(torch.uint8)  # packed bytes that travelled as floats (e.g. offline data's float32 vectors)
        if x.dtype == torch.uint8:
            pieces = self.layout.unpack(x)
        else:
            pieces = torch.split(x, self.flat_widths, dim=1)
        return torch.cat([enc(x) for enc, x in zip(self.parts, pieces)], dim=1)


def is_image(space: gym.Space) -> bool:
    return image_shape(space) is not None


def is_board(space: gym.Space) -> bool:
    """A Box of 3 axes that is not an image: an integer-coded board (Connect Four's 6x7x2 int8 planes), read flat
    unless `conv_filters` is set (`reads_with_conv`)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3 and not is_image(space)


def reads_with_conv(space: gym.Space, model_config: dict | None = None) -> bool:
    """Whether `encoder_for` gives this space (an action mask beside it left out) a `ConvEncoder`: images always,
    boards when `conv_filters` asks for it."""
    space = observation_part(space)
    return is_image(space) or (is_board(space) and (model_config or {}).get("conv_filters") is not None)


def encoder_for(space: gym.Space, model_config: dict | None = None) -> nn.Module:
    """The encoder of an observation space (an action mask beside it is left out), by the rules above."""
    cfg = model_config or {}
    space = observation_part(space)
    if reads_with_conv(space, cfg):
        return ConvEncoder(space, cfg.get("conv_filters"), cfg.get("conv_activation", "relu"))
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)) and any(_has_image(p) for p in _parts(space)):
        return PartsEncoder(space, cfg)
    if cfg.get("conv_filters") is not None:
        check_conv_filters(cfg["conv_filters"])  # range-checked even where unused
        shape = tuple(getattr(space, "shape", None) or ())
        if shape not in _WARNED_FLAT:  # said once: a shared model section may reach flat and image policies alike
            _WARNED_FLAT.add(shape)
            log.warning("model.conv_filters is set but observations of shape %s are neither images nor boards (a Box "
                        "with 3 axes, HWC or CHW): they are read flat by an MLP and conv_filters goes unused", shape)
    return FlatEncoder(gym.spaces.flatdim(space))


def _parts(space):
    return list(space.spaces.values()) if isinstance(space, gym.spaces.Dict) else list(space.spaces)


def _has_image(space) -> bool:
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return any(_has_image(p) for p in _parts(space))
    return is_image(space)


# -- core slot -------------------------------------------------------------------------
class IdentityCore(nn.Module):
    """The memoryless core: features pass through (recurrent cores take this slot)."""

    def __init__(self, dim: int):
        super().__init__()
        self.out_dim = int(dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return features


def core_for(in_dim: int, model_config: dict | None = None) -> nn.Module:
    return IdentityCore(in_dim)


# -- heads -----------------------------------------------------------------------------
def policy_output_dim(action_space: gym.Space) -> int:
    """Logits (Discrete: n, MultiDiscrete: sum of nvec) or Gaussian means (Box: one per action dimension)."""
    if isinstance(action_space, gym.spaces.Box):
        return int(np.prod(action_space.shape))
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    raise TypeError(f"unsupported action space {action_space}; supported: Discrete, MultiDiscrete, Box")


def policy_head(in_dim: int, hiddens: list[int], action_space: gym.Space, activation: str) -> nn.Sequential:
    """MLP -> logits or Gaussian means (small output init: near-uniform / near-zero start).
    Gaussian log-stds are a separate state-independent parameter (`gaussian_log_std`)."""
    return mlp(in_dim, hiddens, policy_output_dim(action_space), activation, out_gain=0.01)


def gaussian_log_std(action_space: gym.spaces.Box, initial: float = 0.0) -> nn.Parameter:
    return nn.Parameter(torch.full((int(np.prod(action_space.shape)),), float(initial)))


def value_head(in_dim: int, hiddens: list[int], activation: str, popart: bool = False) -> nn.Sequential:
    """MLP -> one value per row ([B, 1]); with `popart`, in normalised units scaled back by a `ValueScale`."""
    return scaled_value_head(mlp(in_dim, hiddens, 1, activation, out_gain=1.0), popart)


def check_popart(value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"model.popart must be true or false, got {value!r}")
    return value


def q_trunk(in_dim: int, hiddens: list[int], activation: str, layer_norm: bool = False) -> tuple[nn.Sequential | None, int]:
    """The Q network's hidden layers before its heads (its last activation applied by the caller): (trunk, width).

    `layer_norm`: a LayerNorm after each hidden Linear, before its activation (PQN's network: Gallici et al. 2024
    keep Q-learning without a target network stable with it)."""
    if not hiddens:
        return None, in_dim
    if not layer_norm:
        return mlp(in_dim, hiddens[:-1], hiddens[-1], activation, out_gain=np.sqrt(2)), hiddens[-1]
    layers: list[nn.Module] = []
    for i, width in enumerate(hiddens):
        layers += [linear(in_dim, width, np.sqrt(2)), nn.LayerNorm(width)]
        if i < len(hiddens) - 1:
            layers.append(ACTIVATIONS[activation]())
        in_dim = width
    return nn.Sequential(*layers), hiddens[-1]


def q_head(in_dim: int, n_out: int) -> nn.Sequential:
    """One linear layer: Q values (or advantages / the state value of a dueling head)."""
    return nn.Sequential(linear(in_dim, n_out, 1.0))
