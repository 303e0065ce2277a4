"""Acting in NumPy: the default actor-critics' sampling pass for runners, without torch calls.

A runner acts once per env step on a few dozen rows, between env steps that evict the CPU
caches. There each torch call costs 5-10 us of dispatch, and the default MLP's pass (six
linear layers, four tanh, the distribution, the draw) is 15-20 torch calls: 240-300 us per step,
about 15 % of a runner's time on simple_spread beside the learner. The same arithmetic in NumPy
costs about 110 us (benchmarks/README.md, "Acting in NumPy").

`NumpyActor` is built from a module's own torch layers (`RLModule.numpy_actor`) and reads their
weights again whenever a parameter changed (its version counter or storage), so it always acts
with the module's current weights. The random draws come from the runner's torch generator, the
same draws in the same order as `Distribution.sample`: a seed gives the same actions either way,
up to float rounding of the logits (the two libraries' matmuls round differently in the last
bit), and a checkpoint's generator state resumes either path exactly.
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from marl.modules.activations import SMALL, mlp_description
from marl.modules.functional import MASKED_LOGIT
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
# The input function of networks that read the observations alone (the default MLP's): the compiled JAX rollout
# (`marl.runners.jax_rollout`) mirrors only such actors.
OBS_INPUT = itemgetter("obs")


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


# The NumPy form of each activation of the module description (`marl.modules.activations.ACTIVATION_NAMES`).
NUMPY_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0), "elu": _elu, "silu": _silu,
}


def _row_reduce(op: np.ufunc, x: np.ndarray) -> np.ndarray:
    """`op` over each row's few entries, [R, K] -> [R, 1]. NumPy reduces along a short last axis slowly (max over
    3,072 x 5: 105 us); K-1 column-wise ops take 7. Left to right, as NumPy's own loop adds fewer than 8 entries."""
    if x.shape[-1] > 8:
        return op.reduce(x, axis=-1, keepdims=True)
    out = x[..., 0].copy()
    for j in range(1, x.shape[-1]):
        op(out, x[..., j], out=out)
    return out[..., None]


class _NumpyMLP:
    """A network's description (`mlp_description`) as NumPy arrays and functions (weights transposed once per refresh).

    Over many rows (a batched runner's thousands of (world, agent) rows) each tanh runs as a sigmoid, with the
    identity tanh(z) = 2 sigmoid(2z) - 1 folded into the weights around it: the Linear before it scaled by 2, the
    Linear after it taking 2 sigmoid - 1 as (2 W) sigmoid + (b - W 1). NumPy's float32 tanh is scalar on AVX2
    (1.9 ns per element here) and torch's sigmoid vectorised (0.9): the four activations of a tanh actor-critic
    were a third to a half of its acting pass at 1,024 worlds (`benchmarks/speed/vmas_rate.py --unfolded` sets the
    two side by side).
    Below SMALL elements per activation (the dict runner's few dozen rows) the plain weights and np.tanh run:
    torch's call costs more there than the kernel saves. Both give the same function up to float rounding.
    """

    def __init__(self, layers: list):
        self.layers = layers
        self.params = [p for kind, layer in layers if kind == "linear" for p in (layer.weight, layer.bias)]
        self.steps: list = []
        self.folded: list | None = None
        # Each tanh right after a Linear folds; any other activation (or a tanh elsewhere) keeps its NumPy twin.
        self._fold = [kind == "activation" and layer == "tanh" and i > 0 and layers[i - 1][0] == "linear"
                      for i, (kind, layer) in enumerate(layers)]
        self.width = max((layer.out_features for kind, layer in layers if kind == "linear"), default=1)

    def refresh(self) -> None:
        self.steps = [
            (layer.weight.detach().cpu().numpy().T.copy(), layer.bias.detach().cpu().numpy().copy()) if kind == "linear"
            else NUMPY_ACTIVATIONS[layer] for kind, layer in self.layers
        ]
        self.folded = self._folded() if any(self._fold) else None

    def _folded(self) -> list:
        steps = list(self.steps)
        for i, fold in enumerate(self._fold):
            if not fold:
                continue
            w, b = steps[i - 1]
            steps[i - 1] = (w * 2.0, b * 2.0)  # sigmoid(2z): the Linear before scaled (exact: a power of two)
            steps[i] = _sigmoid_
            later = next((j for j in range(i + 1, len(steps)) if type(steps[j]) is tuple), None)
            if later is not None:  # the next Linear reads 2 sigmoid - 1
                w, b = steps[later]
                steps[later] = (w * 2.0, b - w.sum(axis=0))
        return steps

    def __call__(self, x: np.ndarray) -> np.ndarray:
        steps = self.folded if self.folded is not None and x.shape[0] * self.width >= SMALL else self.steps
        for step in steps:
            if type(step) is tuple:
                x = x @ step[0]
                x += step[1]
            else:
                x = step(x)
        return x


def _sigmoid_(x: np.ndarray) -> np.ndarray:
    """sigmoid in place on a float32 array the MLP made (torch's vectorised kernel on the same memory)."""
    t = torch.from_numpy(x)
    torch.sigmoid(t, out=t)
    return x


class NumpyActor:
    """One module's acting pass: `act(inputs, generator, explore) -> (actions, log-probs, values or None)`.

    `inputs` are the module's runner inputs as NumPy (`obs`, `action_mask`, `agent_index`, `state`);
    `pi_input` / `vf_input` map them to each network's input (the module's own joins, in NumPy);
    `vf_input` returns None where the pass has no value input (no value head, or no state given).
    `log_std` is the Gaussian policy's state-independent log-std parameter (Box actions), else None.
    """

    def __init__(self, pi: nn.Sequential, vf: nn.Sequential | None, log_std: torch.Tensor | None,
                 pi_input: Callable[[dict], np.ndarray], vf_input: Callable[[dict], np.ndarray | None]):
        self.pi = _NumpyMLP(mlp_description(pi))
        self.vf = _NumpyMLP(mlp_description(vf)) if vf is not None else None
        self.log_std_param = log_std
        self.pi_input, self.vf_input = pi_input, vf_input
        self.reads_obs_only = pi_input is OBS_INPUT and vf_input is OBS_INPUT
        self.params = self.pi.params + (self.vf.params if self.vf is not None else []) + ([log_std] if log_std is not None else [])
        self._key = None
        self.log_std = self.std = None
        self._draws: dict[tuple, tuple[torch.Tensor, np.ndarray]] = {}  # (shape, kind) -> reused buffer, its NumPy view

    @classmethod
    def of(cls, pi: nn.Sequential, vf: nn.Sequential | None, action_space: gym.Space, log_std: torch.Tensor | None,
           pi_input: Callable[[dict], np.ndarray], vf_input: Callable[[dict], np.ndarray | None]) -> "NumpyActor | None":
        """The actor of these heads, or None where they cannot be mirrored: a layer with no NumPy twin, or an
        action space other than Discrete and Box (MultiDiscrete acts in torch)."""
        if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box)):
            return None
        if any(seq is not None and mlp_description(seq) is None for seq in (pi, vf)):
            return None
        return cls(pi, vf, log_std, pi_input, vf_input)

    def refresh(self) -> tuple:
        """Reads the module's weights again where a parameter changed in place (load_state_dict, an optimiser step:
        its version counter) or was given new storage; returns their version key (equal keys: the same weights).
        2-3 us per call, against a pass of ~100 us."""
        key = tuple((p._version, p.data_ptr()) for p in self.params)
        if key != self._key:
            self.pi.refresh()
            if self.vf is not None:
                self.vf.refresh()
            if self.log_std_param is not None:
                self.log_std = np.clip(self.log_std_param.detach().cpu().numpy(), -20.0, 2.0)  # DiagGaussian's clamp
                self.std = np.exp(self.log_std)
            self._key = key
        return key

    def act(self, inputs: dict, generator: torch.Generator, explore: bool):
        self.refresh()
        out = self.pi(self.pi_input(inputs))
        # Values as forward_exploration gives them; greedy acting is forward_inference's pass (none).
        vf_in = self.vf_input(inputs) if self.vf is not None and explore else None
        values = self.vf(vf_in)[:, 0] if vf_in is not None else None
        if self.log_std is not None:
            return (*self._gaussian(out, generator, explore), values)
        return (*self._categorical(out, inputs.get("action_mask"), generator, explore), values)

    def values(self, inputs: dict) -> np.ndarray | None:
        """The value pass alone (bootstrapping a cut trajectory); None without a value head or its input."""
        self.refresh()
        vf_in = self.vf_input(inputs) if self.vf is not None else None
        return self.vf(vf_in)[:, 0] if vf_in is not None else None

    def _draw(self, shape: tuple, normal: bool, generator: torch.Generator) -> np.ndarray:
        # torch.rand / normal_ on a fresh tensor are empty + uniform_ / normal_: the same numbers as drawing into a
        # reused buffer, which costs half as much between env steps (no allocation, no size and dtype parsing).
        entry = self._draws.get((shape, normal))
        if entry is None:
            buffer = torch.empty(shape)
            entry = self._draws[(shape, normal)] = (buffer, buffer.numpy())
        if normal:
            entry[0].normal_(generator=generator)
        else:
            entry[0].uniform_(generator=generator)
        return entry[1]  # (overwritten by the next draw of this shape: used at once)

    def _categorical(self, logits: np.ndarray, mask, generator, explore: bool):
        if mask is not None:
            logits = np.where(mask < 0.5, np.float32(MASKED_LOGIT), logits)
        shifted = logits - _row_reduce(np.maximum, logits)
        log_probs = shifted - np.log(_row_reduce(np.add, np.exp(shifted)))
        if explore:  # Gumbel-max with Categorical.sample's draw: argmax(log p - log(-log u))
            u = np.minimum(np.maximum(self._draw(log_probs.shape, False, generator), 1e-20), 1.0)  # (np.clip's Python
            # wrapper costs more than its two ufuncs at a few dozen rows)
            actions = np.argmax(log_probs - np.log(-np.log(u)), axis=-1)
        else:
            actions = np.argmax(log_probs, axis=-1)
        logp = log_probs[np.arange(len(actions)), actions]  # (np.take_along_axis builds its index in Python: ~10 us)
        return actions, logp

    def _gaussian(self, mean: np.ndarray, generator, explore: bool):
        if explore:  # DiagGaussian.sample's draw: mean + std * N(0, 1)
            actions = mean + self.std * self._draw(mean.shape, True, generator)
        else:
            actions = mean
        z = (actions - mean) / self.std
        logp = (-0.5 * z * z - self.log_std - np.float32(LOG_SQRT_2PI)).sum(axis=-1)
        return actions, logp.astype(np.float32, copy=False)
