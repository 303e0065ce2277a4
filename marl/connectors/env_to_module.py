"""env -> module pieces: raw observations of one policy's acting rows -> the module's inputs.

`Flatten` always comes first (Box reshape, Discrete one-hot, any other space through
gymnasium's flatten, all to float32; PettingZoo action masks split off). Image observations
(a Box with 3 axes) are the exception when the policy's module takes them (`RLModule.keeps_image_obs`,
true for the default modules): they stay arrays of their shape in their dtype — uint8 frames stay
uint8 through runners, batches, replay and the object store, and the module scales them; so do Dict/Tuple
observations with image parts, packed into one uint8 byte row each (`marl.modules.parts`). Then the configured pieces:
`MeanStd` (running mean/std normalisation, synced through the learner), `FrameStack`
(the last k observations of each (env copy, agent)), `PrevActionReward` (the agent's
previous action and the reward it got since, appended). `EnvToModulePipeline` runs them.

`Flatten` and the space helpers live in `marl.connectors.flatten`, the running statistics behind `MeanStd` in
`marl.connectors.running_stats`; this module holds the configurable pieces and the pipeline that runs them.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from marl.connectors.flatten import Flatten, flat_box, image_dtype, with_observation
from marl.connectors.module_to_env import ActionAdapter
from marl.connectors.piece import CONTEXT_FIELDS, ConnectorPiece, RowContext
from marl.connectors.running_stats import MeanStdFilter
from marl.modules.spaces import as_image_box, flat_obs_dim, image_layout, image_space

# Moved to their own modules; still importable from here (tests and user pieces import them from this module).
__all__ = ["EnvToModulePipeline", "Flatten", "FrameStack", "MeanStd", "MeanStdFilter", "PrevActionReward", "flat_box",
           "image_dtype", "with_observation"]


# -- pieces -------------------------------------------------------------------------------
class MeanStd(ConnectorPiece):
    """Normalises observations with running mean/std statistics shared by all runners (clipped to +-clip)."""

    synced = True

    def __init__(self, clip: float = 10.0):
        if not isinstance(clip, (int, float)) or isinstance(clip, bool) or clip <= 0:
            raise ValueError(f"clip must be a number > 0, got {clip!r}")
        self.clip = float(clip)
        self._filter: MeanStdFilter | None = None

    def transform_space(self, space, action_space):
        if image_space(space) is not None:
            raise ValueError(
                "mean_std normalises flat observations, and this policy's are images (scaled to [0, 1] in the module); "
                "leave mean_std out for it (or use a module with keeps_image_obs = False)"
            )
        self._filter = MeanStdFilter(flat_obs_dim(space), self.clip)
        return space

    def __call__(self, obs, ctx):
        return self._filter(obs, update=ctx.update_stats)

    def pop_delta(self):
        return self._filter.pop_delta()

    def merge_delta(self, delta) -> None:
        self._filter.set_state(MeanStdFilter.merge(self._filter.central, delta))

    def get_central(self):
        return {k: (np.array(v) if k != "count" else v) for k, v in self._filter.central.items()}

    def set_central(self, central) -> None:
        self._filter.set_state(central)

    def get_state(self) -> dict:
        return self._filter.snapshot()

    def set_state(self, state: dict) -> None:
        self._filter.load_snapshot(state)


class FrameStack(ConnectorPiece):
    """The agent's last k observations, oldest first (zeros before its episode's first one).

    Flat observations are concatenated; images are stacked along their channel axis
    ((H, W, C) -> (H, W, k*C), (C, H, W) -> (k*C, H, W)) in their own dtype (uint8 stays uint8).
    """

    needs = frozenset({"episode_start"})

    def __init__(self, k: int = 4):
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        self.k = k
        self._frame_shape, self._dtype, self._channel_axis = (0,), np.float32, None
        self._frames: np.ndarray | None = None  # [num_slots, k, d]: one stack per (env copy, agent)

    def transform_space(self, space, action_space):
        image = image_space(space)
        if image is not None:
            self._frame_shape, self._dtype = tuple(image.shape), image_dtype(image)
            self._channel_axis = 2 if image_layout(image.shape) == "HWC" else 0
            low, high = np.minimum(image.low, 0), np.maximum(image.high, 0)
            low, high = (np.concatenate([b] * self.k, axis=self._channel_axis) for b in (low, high))
            return with_observation(space, gym.spaces.Box(low, high, low.shape, image.dtype))
        box = flat_box(space)
        self._frame_shape, self._dtype, self._channel_axis = (int(box.shape[0]),), np.float32, None
        low, high = np.minimum(box.low, 0.0), np.maximum(box.high, 0.0)  # zero padding is inside the bounds
        stacked = gym.spaces.Box(np.tile(low, self.k), np.tile(high, self.k), (self.k * box.shape[0],), np.float32)
        return with_observation(space, stacked)

    def __call__(self, obs, ctx):
        if self._frames is None or len(self._frames) < ctx.num_slots:
            frames = np.zeros((ctx.num_slots, self.k) + self._frame_shape, self._dtype)
            if self._frames is not None:
                frames[: len(self._frames)] = self._frames
            self._frames = frames
        history = self._frames[ctx.slots]  # a copy (fancy indexing)
        history[ctx.episode_start] = 0
        stacked = np.concatenate([history[:, 1:], obs[:, None]], axis=1)
        if not ctx.peek:
            self._frames[ctx.slots] = stacked
        if self._channel_axis is None:
            return stacked.reshape(len(obs), -1)
        # [m, k, ...frame] -> frames side by side on the channel axis (oldest first)
        return np.concatenate(list(stacked.swapaxes(0, 1)), axis=1 + self._channel_axis)

    def get_state(self) -> dict:
        return {} if self._frames is None else {"frames": self._frames.copy()}

    def set_state(self, state: dict) -> None:
        self._frames = np.array(state["frames"], self._dtype) if "frames" in state else None


class PrevActionReward(ConnectorPiece):
    """Appends the agent's previous action (one-hot for discrete actions, or raw) and the reward it got since.

    Zeros at the agent's first step of an episode.
    """

    needs = frozenset({"episode_start", "prev_action", "prev_reward"})

    def __init__(self, one_hot: bool = True, reward: bool = True):
        for key, value in (("one_hot", one_hot), ("reward", reward)):
            if not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false, got {value!r}")
        self.one_hot, self.reward = one_hot, reward
        self._encode = None
        self._width = 0

    def transform_space(self, space, action_space):
        if image_space(space) is not None:
            raise ValueError("prev_action_reward appends to flat observations, and this policy's are images")
        if isinstance(action_space, gym.spaces.Discrete) and self.one_hot:
            n = int(action_space.n)
            self._width, self._encode = n, lambda a: np.eye(n, dtype=np.float32)[a]
            low, high = np.zeros(n), np.ones(n)
        elif isinstance(action_space, gym.spaces.MultiDiscrete) and self.one_hot:
            nvec = np.asarray(action_space.nvec).reshape(-1)
            offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
            self._width = int(nvec.sum())

            def encode(a, offsets=offsets, width=self._width):
                out = np.zeros((len(a), width), np.float32)
                out[np.arange(len(a))[:, None], offsets + a.reshape(len(a), -1)] = 1.0
                return out

            self._encode = encode
            low, high = np.zeros(self._width), np.ones(self._width)
        else:  # raw actions (a discrete index as a float)
            box = gym.spaces.flatten_space(action_space) if isinstance(action_space, gym.spaces.Box) else None
            self._width = int(np.prod(action_space.shape)) if action_space.shape else 1
            self._encode = lambda a: a.reshape(len(a), -1).astype(np.float32)
            low = np.full(self._width, -np.inf) if box is None else box.low
            high = np.full(self._width, np.inf) if box is None else box.high
        box = flat_box(space)
        parts_low, parts_high = [box.low, np.minimum(low, 0.0)], [box.high, np.maximum(high, 0.0)]
        if self.reward:
            parts_low.append([-np.inf])
            parts_high.append([np.inf])
        low, high = np.concatenate(parts_low).astype(np.float32), np.concatenate(parts_high).astype(np.float32)
        return with_observation(space, gym.spaces.Box(low, high, low.shape, np.float32))

    def __call__(self, obs, ctx):
        action = self._encode(ctx.prev_action)
        action[ctx.episode_start] = 0.0
        parts = [obs, action]
        if self.reward:
            parts.append(ctx.prev_reward[:, None])
        return np.concatenate(parts, axis=1, dtype=np.float32)


# -- the pipeline -----------------------------------------------------------------------
class EnvToModulePipeline:
    """`Flatten`, then the pieces, for one policy; `output_space` is what its module is built from.

    Per-(env copy, agent) bookkeeping (only when a piece needs it): the episode each slot
    last acted in (-> `episode_start`) and, for previous-action inputs, the slot's last
    action and its return at that moment (-> `prev_reward` = return now - return then).
    `num_slots` = env copies x possible agents (0: a pipeline that never runs on rows,
    e.g. the learner's copy that only keeps central statistics). `keep_images`: the module
    takes image observations as they are (`RLModule.keeps_image_obs`); `obs_shape`/`obs_dtype`
    say what one row's observation is.
    """

    def __init__(self, pieces: dict[str, ConnectorPiece], observation_space, action_space, num_slots: int = 0,
                 keep_images: bool = False):
        self.flatten = Flatten(observation_space, keep_images)
        self.pieces = dict(pieces)
        space = observation_space
        if image_space(space) is not None:  # pieces and module see what the data are: flat, or an image of 3 axes
            space = with_observation(space, as_image_box(image_space(space)) if keep_images else flat_box(space))
        if self.flatten.parts is not None and self.pieces:
            raise ValueError(
                f"env->module pieces {sorted(self.pieces)} work on flat or image observations, and this policy's are "
                "a Dict/Tuple with image parts (packed as bytes for the module's per-part encoders); leave them out "
                "for it (or use a module with keeps_image_obs = False, which gets them flattened to float32)"
            )
        for piece in self.pieces.values():
            space = piece.transform_space(space, action_space)
        self.output_space = space
        self.obs_dim = flat_obs_dim(space)
        image = image_space(space) if keep_images else None
        # What one row's obs is in runners, batches and replay.
        self.obs_shape = (self.obs_dim,) if image is None else tuple(image.shape)
        self.obs_dtype = np.dtype(np.float32 if image is None else image_dtype(image))
        if self.flatten.parts is not None:
            self.obs_shape, self.obs_dtype = (self.flatten.parts.nbytes,), np.dtype(np.uint8)
        self.masked = self.flatten.masked
        self._steps = list(self.pieces.values())
        self.needs = frozenset().union(*(p.needs for p in self._steps)) & CONTEXT_FIELDS
        self.synced = {key: p for key, p in self.pieces.items() if p.synced}
        self._slot_episode = self._last_action = self._return_at = None
        if self.needs:
            self._slot_episode = np.full(num_slots, -1, np.int64)
        if self.needs & {"prev_action", "prev_reward"}:
            layout = ActionAdapter(action_space)
            self._last_action = np.zeros((num_slots,) + layout.shape, layout.dtype)
            self._return_at = np.zeros(num_slots, np.float64)

    def __call__(self, raw: list, ctx: RowContext) -> tuple[np.ndarray, np.ndarray | None]:
        obs, ctx.action_mask = self.flatten(raw)
        if self.needs:
            self._fill(ctx)
        for piece in self._steps:
            obs = piece(obs, ctx)
        return obs, ctx.action_mask

    def _fill(self, ctx: RowContext) -> None:
        slots = ctx.slots
        start = self._slot_episode[slots] != ctx.episode_id
        ctx.episode_start = start
        if not ctx.peek:
            self._slot_episode[slots] = ctx.episode_id
        if self._last_action is not None and ctx.prev_action is None:  # acting rows (a peek brings its own)
            prev = self._last_action[slots]
            prev[start] = 0
            reward = (ctx.agent_return - self._return_at[slots]).astype(np.float32)
            reward[start] = 0.0
            ctx.prev_action, ctx.prev_reward = prev, reward

    def record_actions(self, actions: np.ndarray, ctx: RowContext) -> None:
        """The module's actions for the rows of `ctx` (what `prev_action` returns at the agent's next step)."""
        if self._last_action is not None:
            self._last_action[ctx.slots] = actions.reshape((len(actions),) + self._last_action.shape[1:])
            self._return_at[ctx.slots] = ctx.agent_return

    # -- state ------------------------------------------------------------------------------
    def get_state(self) -> dict:
        state = {"pieces": {key: p.get_state() for key, p in self.pieces.items()}}
        if self._slot_episode is not None:
            state["slot_episode"] = self._slot_episode.copy()
        if self._last_action is not None:
            state["last_action"], state["return_at"] = self._last_action.copy(), self._return_at.copy()
        return state

    def set_state(self, state: dict) -> None:
        for key, piece_state in state.get("pieces", {}).items():
            if key in self.pieces:
                self.pieces[key].set_state(piece_state)
        mine_by_name = {"slot_episode": self._slot_episode, "last_action": self._last_action, "return_at": self._return_at}
        for name, mine in mine_by_name.items():
            if mine is not None and name in state:
                saved = np.asarray(state[name])
                n = min(len(mine), len(saved))  # a restore with another number of env copies keeps the common slots
                mine[:n] = saved[:n]

    def pop_deltas(self) -> dict:
        return {key: p.pop_delta() for key, p in self.synced.items()}

    def get_central(self) -> dict:
        return {key: p.get_central() for key, p in self.synced.items()}

    def set_central(self, central: dict) -> None:
        for key, value in central.items():
            if key in self.synced:
                self.synced[key].set_central(value)
