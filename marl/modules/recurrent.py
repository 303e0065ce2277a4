"""Recurrent cores (LSTM, GRU) and the default recurrent actor-critics built on them.

model options (in `training.model` or `multi_agent.policies.<pid>.model`):

    recurrent: lstm | gru | null   # null (the default): memoryless modules
    cell_size: 64                  # the core's hidden size
    max_seq_len: 20                # the learner trains on chunks of at most this many steps

How a stateful module sees its rows (the contract is `marl.modules.rl_module`):

* acting: one row per acting agent, `state_in` {name: [B, ...]} the agent's state
  entering the step (the initial state at its episode start), and the module returns
  `state_out`;
* training (`forward_train`): rows are whole sequences laid end to end, `seq_lens`
  [S] (int64) their lengths and `state_in` {name: [S, ...]} the state entering each
  sequence's first row (what the runner recorded there). The learner cuts each
  agent's trajectory piece into chunks of at most `max_seq_len` rows
  (`marl.learners.sequences`). The module pads them into [S, T, ...] with zeros, runs
  its core over time, and returns one output row per input row: padded steps come
  after each sequence's last real step, so they influence no real output, and they
  are dropped before any loss sees them.

`pad_sequences` / `unpad_sequences` do that layout for a user's own recurrent
module; `RecurrentCore` is the core itself (state names `h`, and `c` for LSTM).
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from marl.errors import ConfigError
from marl.modules.catalog import (
    ACTIVATIONS, ENCODER_KEYS, check_activation, check_hiddens, check_popart, encoder_for, linear, state_encoder,
)
from marl.modules.popart import scaled_value_head
from marl.modules.rl_module import RLModule
from marl.import_paths import import_object
from marl.modules.functional import as_float_state

RECURRENT_KINDS = ("lstm", "gru")
RECURRENT_KEYS = {"recurrent", "cell_size", "max_seq_len"}
DEFAULT_CELL_SIZE = 64
DEFAULT_MAX_SEQ_LEN = 20


def recurrent_options(model: dict, where: str = "model") -> tuple[str | None, int, int]:
    """(kind or None, cell_size, max_seq_len) of a model config, range-checked: one clear line for a bad value."""
    kind = model.get("recurrent")
    if kind is not None and kind not in RECURRENT_KINDS:
        raise ConfigError(f"'{where}.recurrent' is {kind!r}; allowed: {list(RECURRENT_KINDS)} or null (memoryless)")
    values = {}
    for key, default in (("cell_size", DEFAULT_CELL_SIZE), ("max_seq_len", DEFAULT_MAX_SEQ_LEN)):
        value = model.get(key, default)
        if value is None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"'{where}.{key}' is {value!r}; it must be an integer >= 1")
        values[key] = value
    return kind, values["cell_size"], values["max_seq_len"]


def sequence_chunking(config, policy_id: str) -> tuple[int, int]:
    """(max_seq_len, burn_in) of a policy: how runners, the learner and sequence replay cut its trajectories
    (`burn_in`: the policy's plan, a recurrent Q network's `training.burn_in`, else 0)."""
    plan = config.plan_for(policy_id)
    return recurrent_options(plan.model)[2], int(plan.burn_in)


def check_recurrent_support(module_class, what: str) -> None:
    """A built-in module class that has no recurrent variant yet (the Q modules of DQN, VDN, QMIX): one clear line."""

    cls = module_class
    if isinstance(cls, str):
        try:
            cls = import_object(cls)
        except (ImportError, AttributeError, ValueError):
            return  # building the module reports it
    if cls is None or not isinstance(cls, type) or not cls.__module__.startswith("marl.modules."):
        return  # the default actor-critic, or a user's module: it reads the options itself
    if cls.__name__ not in RECURRENT_DEFAULTS and cls.__name__ not in RECURRENT_DEFAULTS.values():
        raise ConfigError(
            f"{what} is not available with {cls.__name__} yet: recurrent cores come with "
            f"{sorted(RECURRENT_DEFAULTS)} (PPO, MAPPO, APPO, IMPALA, A2C, PG, DQN, VDN, QMIX)"
        )


# the built-in memoryless classes (by name) -> their recurrent variants
RECURRENT_DEFAULTS = {"ActorCriticMLP": "RecurrentActorCritic", "CentralCriticMLP": "RecurrentCentralCritic",
                      "JointQModule": "RecurrentJointQ", "QMLP": "RecurrentQ"}


# -- sequence layout ------------------------------------------------------------------------
def sequence_positions(seq_lens: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """(position of each row in the padded [S * T] layout, S, T) of rows laid out as sequences end to end."""
    lens = seq_lens.long()
    s, t = len(lens), int(lens.max()) if len(lens) else 0
    seq = torch.repeat_interleave(torch.arange(s), lens)
    first = torch.repeat_interleave(torch.cumsum(lens, 0) - lens, lens)
    step = torch.arange(len(seq)) - first
    return seq * t + step, s, t


def pad_sequences(x: torch.Tensor, positions: torch.Tensor, s: int, t: int) -> torch.Tensor:
    """[N, ...] rows -> [S, T, ...], zeros after each sequence's end."""
    out = x.new_zeros((s * t,) + tuple(x.shape[1:]))
    out[positions] = x
    return out.reshape((s, t) + tuple(x.shape[1:]))


def unpad_sequences(y: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """[S, T, ...] -> the [N, ...] rows at `positions` (padded steps dropped)."""
    return y.reshape((-1,) + tuple(y.shape[2:]))[positions]


class RecurrentCore(nn.Module):
    """An LSTM or GRU over [S, T, F] inputs; its state is {'h': [S, cell]} (+ 'c' for LSTM)."""

    def __init__(self, kind: str, n_in: int, cell_size: int):
        super().__init__()
        self.kind, self.cell_size = kind, cell_size
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(n_in, cell_size, batch_first=True)
        self.state_names = ("h", "c") if kind == "lstm" else ("h",)

    def initial_state(self) -> dict[str, torch.Tensor]:
        return {name: torch.zeros(self.cell_size) for name in self.state_names}

    def forward(self, x: torch.Tensor, state: dict[str, torch.Tensor],
                detach_at: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """`detach_at` [S]: the step of each sequence whose entering state is detached, so no gradient reaches the
        steps before it (R2D2's burn-in without gradients); None: gradients flow through every step."""
        if detach_at is not None:
            return self._detached_forward(x, state, detach_at)
        h = state["h"].unsqueeze(0).contiguous()
        if self.kind == "lstm":
            y, (h, c) = self.rnn(x, (h, state["c"].unsqueeze(0).contiguous()))
            return y, {"h": h.squeeze(0), "c": c.squeeze(0)}
        y, h = self.rnn(x, h)
        return y, {"h": h.squeeze(0)}

    def _detached_forward(self, x, state, detach_at):
        """Step by step up to the last detach point, each sequence's state detached at its own; one pass after it."""
        last, outputs = int(detach_at.max()), []
        for t in range(last + 1):
            cut = (detach_at == t).unsqueeze(-1)
            state = {name: torch.where(cut, value.detach(), value) for name, value in state.items()}
            if t < last:
                y, state = self(x[:, t : t + 1], state)
                outputs.append(y)
        y, state = self(x[:, last:], state)
        return torch.cat(outputs + [y], dim=1), state


class _Tower(nn.Module):
    """encoder (`marl.modules.catalog`, from the space) [+ agent one-hot] -> MLP (`hiddens`) -> LSTM/GRU -> linear
    head: one of the actor-critic's two networks."""

    def __init__(self, encoder: nn.Module, extra: int, hiddens: list[int], activation: str, kind: str, cell_size: int,
                 n_out: int, gain: float, popart: bool = False):
        super().__init__()
        self.encoder = encoder
        layers: list[nn.Module] = []
        width = encoder.out_dim + extra
        for h in hiddens:
            layers += [linear(width, h, 2**0.5), ACTIVATIONS[activation]()]
            width = h
        self.mlp = nn.Sequential(*layers)
        self.core = RecurrentCore(kind, width, cell_size)
        self.head = scaled_value_head(linear(cell_size, n_out, gain), popart)

    def forward(self, x: torch.Tensor, extra: torch.Tensor | None, state: dict, layout) -> tuple[torch.Tensor, dict]:
        features = self.encoder(x)
        if extra is not None:
            features = torch.cat([features, extra], dim=-1)
        features = self.mlp(features)
        if layout is None:  # acting: one step per row
            y, state_out = self.core(features.unsqueeze(1), state)
            return self.head(y.squeeze(1)), state_out
        positions, s, t = layout
        y, state_out = self.core(pad_sequences(features, positions, s, t), state)
        return self.head(unpad_sequences(y, positions)), state_out


class RecurrentActorCritic(RLModule):
    """Actor and critic, each encoder MLP (`hiddens`, `activation`) -> LSTM/GRU (`cell_size`) -> head.

    Built by default when `model.recurrent` is set (PPO, APPO, IMPALA, A2C, PG). The
    state is the two cores' states: `actor_h`, `critic_h` (+ `actor_c`, `critic_c` for LSTM).
    """

    MODEL_KEYS = {"hiddens", "activation", "initial_log_std", "value_function", "popart"} | RECURRENT_KEYS | ENCODER_KEYS
    keeps_image_obs = True  # image observations reach the catalog's conv encoder as they are (uint8)

    def __init__(self, observation_space, action_space, model_config=None):
        super().__init__(observation_space, action_space, model_config)
        cfg = self.model_config
        unknown = set(cfg) - self.MODEL_KEYS
        if unknown:
            raise ValueError(f"unknown model option(s) {sorted(unknown)}; allowed: {sorted(self.MODEL_KEYS)}")
        kind, cell_size, self.max_seq_len = recurrent_options(cfg)
        if kind is None:
            raise ValueError(f"{type(self).__name__} needs model option 'recurrent' ({' or '.join(RECURRENT_KINDS)})")
        hiddens = check_hiddens(cfg.get("hiddens", [64]))
        activation = check_activation(cfg.get("activation", "tanh"))
        self.continuous = isinstance(action_space, gym.spaces.Box)
        n_out = self.action_dim // 2 if self.continuous else self.action_dim
        self.actor = _Tower(encoder_for(observation_space, cfg), self.extra_dim(), hiddens, activation, kind, cell_size,
                            n_out, 0.01)
        self.critic = None
        if cfg.get("value_function", True):
            self.critic = _Tower(self.critic_encoder(), self.extra_dim(), self.critic_hiddens(hiddens), activation, kind,
                                 cell_size, 1, 1.0, check_popart(cfg.get("popart", False)))
        if self.continuous:
            self.log_std = nn.Parameter(torch.full((n_out,), float(cfg.get("initial_log_std", 0.0))))
        self._names = {"actor": self.actor.core.state_names}
        if self.critic is not None:
            self._names["critic"] = self.critic.core.state_names

    # what the two towers read (the central-critic variant overrides the critic's and adds agent ids)
    def critic_encoder(self) -> nn.Module:
        return encoder_for(self.observation_space, self.model_config)

    def extra_dim(self) -> int:
        return 0

    def extra_input(self, batch) -> torch.Tensor | None:
        return None

    def critic_hiddens(self, hiddens: list[int]) -> list[int]:
        return hiddens

    def critic_input(self, batch) -> torch.Tensor | None:
        return batch["obs"]

    def get_initial_state(self):
        return {f"{tower}_{n}": torch.zeros(getattr(self, tower).core.cell_size) for tower, names in self._names.items() for n in names}

    def _state(self, batch, tower: str, rows: int) -> dict:
        state_in = batch.get("state_in")
        if state_in is None:  # no state given (e.g. a first call after `marl.load_module`): the initial state
            size = getattr(self, tower).core.cell_size
            return {n: torch.zeros(rows, size) for n in self._names[tower]}
        return {n: state_in[f"{tower}_{n}"] for n in self._names[tower]}

    def _outputs(self, batch, values: bool) -> dict:
        seq_lens = batch.get("seq_lens")
        layout = None if seq_lens is None else sequence_positions(seq_lens)
        rows = len(batch["obs"]) if seq_lens is None else len(seq_lens)
        extra = self.extra_input(batch)
        logits, actor_out = self.actor(batch["obs"], extra, self._state(batch, "actor", rows), layout)
        if self.continuous:
            dist_inputs = torch.cat([logits, self.log_std.expand_as(logits)], dim=-1)
        else:
            dist_inputs = self.apply_action_mask(logits, batch)
        out = {"action_dist_inputs": dist_inputs}
        state_out = {f"actor_{n}": v for n, v in actor_out.items()}
        if self.critic is not None:
            critic_x = self.critic_input(batch) if values else None
            if critic_x is not None:
                v, critic_out = self.critic(critic_x, extra, self._state(batch, "critic", rows), layout)
                out["vf_preds"] = v.squeeze(-1)
                state_out.update({f"critic_{n}": s for n, s in critic_out.items()})
            else:  # greedy acting reads no critic input: its state stays as it was
                state_out.update({f"critic_{n}": s for n, s in self._state(batch, "critic", rows).items()})
        out["state_out"] = state_out
        return out

    def forward_train(self, batch):
        return self._outputs(batch, values=True)

    def forward_exploration(self, batch):
        with torch.inference_mode():
            return self._outputs(batch, values=True)

    def forward_inference(self, batch):
        with torch.inference_mode():
            return self._outputs(batch, values=True)


class RecurrentCentralCritic(RecurrentActorCritic):
    """MAPPO's recurrent actor-critic: the actor's core runs over the agent's observations, the critic's
    over the global state (model options of `CentralCriticMLP` plus the recurrent ones)."""

    MODEL_KEYS = RecurrentActorCritic.MODEL_KEYS | {"critic_hiddens", "state_dim", "num_agents", "agent_id", "state_frame"}

    def __init__(self, observation_space, action_space, model_config=None):
        cfg = dict(model_config or {})
        if not cfg.get("state_dim"):
            raise ValueError("RecurrentCentralCritic needs model option 'state_dim' (MAPPOConfig sets it)")
        self._state_dim = int(cfg["state_dim"])
        self._agent_id = bool(cfg.get("agent_id", False))
        self._num_agents = int(cfg.get("num_agents", 0))
        if self._agent_id and self._num_agents < 1:
            raise ValueError("model option agent_id needs num_agents >= 1")
        super().__init__(observation_space, action_space, cfg)
        self.inputs = ("obs", "action_mask", "state") + (("agent_index",) if self._agent_id else ())

    def critic_encoder(self):
        return state_encoder(self._state_dim, self.model_config)

    def extra_dim(self) -> int:
        return self._num_agents if self._agent_id else 0

    def extra_input(self, batch):
        if not self._agent_id:
            return None
        return torch.nn.functional.one_hot(batch["agent_index"].long(), self._num_agents).to(torch.float32)

    def critic_hiddens(self, hiddens):
        return check_hiddens(self.model_config.get("critic_hiddens") or hiddens, "critic_hiddens")

    def critic_input(self, batch):
        if "state" not in batch:
            return None
        return batch["state"] if self.model_config.get("state_frame") else as_float_state(batch["state"])
