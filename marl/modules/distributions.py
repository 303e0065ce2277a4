"""Action distributions built from a module's `action_dist_inputs`.

Small and explicit (no torch.distributions objects): on a 2-core machine the
construction cost of those shows up in every env step.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F


class Distribution:
    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """A random action per row, drawn from `generator` (torch's global generator when None)."""
        raise NotImplementedError

    def deterministic_sample(self) -> torch.Tensor:
        raise NotImplementedError

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def logp_numpy(self, actions: np.ndarray) -> np.ndarray:
        """`logp` of sampled actions given as NumPy, as NumPy (what runners record); the same numbers."""
        return self.logp(torch.from_numpy(actions)).numpy()

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError

    def kl(self, other: "Distribution") -> torch.Tensor:
        raise NotImplementedError


class Categorical(Distribution):
    def __init__(self, logits: torch.Tensor):
        self.log_probs = F.log_softmax(logits, dim=-1)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        # Gumbel-max: argmax(log p - log(-log u)). Runners call this once per env step between env steps that
        # evict the caches, where each torch call costs several microseconds: one draw (torch.rand = empty +
        # uniform_, the same numbers from the generator) and in-place ops, 7 calls.
        lp = self.log_probs
        u = torch.rand(lp.shape, generator=generator, dtype=lp.dtype, device=lp.device).clamp_(1e-20, 1.0)
        return torch.argmax(lp - u.log_().neg_().log_(), dim=-1)

    def deterministic_sample(self) -> torch.Tensor:
        return torch.argmax(self.log_probs, dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def logp_numpy(self, actions: np.ndarray) -> np.ndarray:
        lp = self.log_probs.numpy()  # one torch call; the pick is NumPy indexing (gather copies the same values)
        return lp.reshape(-1, lp.shape[-1])[np.arange(actions.size), actions.reshape(-1)].reshape(actions.shape)

    def entropy(self) -> torch.Tensor:
        p = self.log_probs.exp()
        return -(p * self.log_probs).sum(-1)

    def kl(self, other: "Categorical") -> torch.Tensor:
        p = self.log_probs.exp()
        return (p * (self.log_probs - other.log_probs)).sum(-1)


class MultiCategorical(Distribution):
    """Independent categoricals, one per MultiDiscrete dimension."""

    def __init__(self, logits: torch.Tensor, nvec: list[int]):
        self.parts = [Categorical(chunk) for chunk in torch.split(logits, list(nvec), dim=-1)]

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return torch.stack([c.sample(generator) for c in self.parts], dim=-1)

    def deterministic_sample(self) -> torch.Tensor:
        return torch.stack([c.deterministic_sample() for c in self.parts], dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return sum(c.logp(actions[..., i]) for i, c in enumerate(self.parts))

    def entropy(self) -> torch.Tensor:
        return sum(c.entropy() for c in self.parts)

    def kl(self, other: "MultiCategorical") -> torch.Tensor:
        return sum(c.kl(o) for c, o in zip(self.parts, other.parts))


class DiagGaussian(Distribution):
    """Inputs are [mean, log_std] concatenated on the last axis."""

    def __init__(self, inputs: torch.Tensor):
        self.mean, log_std = torch.chunk(inputs, 2, dim=-1)
        self.log_std = log_std.clamp(-20.0, 2.0)
        self.std = self.log_std.exp()

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        return self.mean + self.std * torch.empty_like(self.mean).normal_(generator=generator)

    def deterministic_sample(self) -> torch.Tensor:
        return self.mean

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        z = (actions - self.mean) / self.std
        return (-0.5 * z.pow(2) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)

    def kl(self, other: "DiagGaussian") -> torch.Tensor:
        return (
            other.log_std
            - self.log_std
            + (self.std.pow(2) + (self.mean - other.mean).pow(2)) / (2.0 * other.std.pow(2))
            - 0.5
        ).sum(-1)


def distribution_factory(action_space: gym.Space):
    """Returns `inputs -> Distribution` for an action space."""
    if isinstance(action_space, gym.spaces.Discrete):
        return Categorical
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        nvec = [int(n) for n in np.asarray(action_space.nvec).reshape(-1)]
        return lambda inputs: MultiCategorical(inputs, nvec)
    if isinstance(action_space, gym.spaces.Box):
        return DiagGaussian
    raise TypeError(f"unsupported action space {action_space}; supported: Discrete, MultiDiscrete, Box")
