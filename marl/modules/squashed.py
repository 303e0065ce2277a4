"""Action distributions of the off-policy continuous-control family (SAC, TD3, MASAC, MADDPG).

Both act in [-1, 1]: the env's bounds are reached by the `unsquash_actions`
connector piece, which the configs of these algorithms switch on.

- `SquashedGaussian` (SAC): a = tanh(u), u ~ N(mean, std). By the change of
  variables, log pi(a) = log N(u) - sum_i log(1 - tanh(u_i)^2); the correction
  is computed as 2 * (log 2 - u - softplus(-2u)), which equals log(1 - tanh(u)^2)
  without its rounding to log(0) once |u| is large.
- `NoisyDeterministic` (TD3, MADDPG): inputs are [action, sigma]; exploration adds
  Gaussian noise of std sigma and clips to [-1, 1]; the greedy action is the action.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from marl.modules.distributions import Distribution

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
_LOG_2PI = math.log(2 * math.pi)
_EDGE = 1.0 - 1e-6  # |a| < 1 keeps atanh finite when log-probs of stored actions are asked


def squash_correction(u: torch.Tensor) -> torch.Tensor:
    """log(1 - tanh(u)^2) per dimension, stably (a large |u| gives about -2|u| + 2 log 2, not log 0)."""
    return 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))


class SquashedGaussian(Distribution):
    """Inputs are [mean, log_std] concatenated on the last axis (as DiagGaussian's)."""

    def __init__(self, inputs: torch.Tensor):
        self.mean, log_std = torch.chunk(inputs, 2, dim=-1)
        self.log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        self.std = self.log_std.exp()

    def _logp_of_u(self, u: torch.Tensor) -> torch.Tensor:
        z = (u - self.mean) / self.std
        gaussian = -0.5 * z.pow(2) - self.log_std - 0.5 * _LOG_2PI
        return (gaussian - squash_correction(u)).sum(-1)

    def rsample_with_logp(self, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action (gradients flow to mean and std) and its log-probability."""
        u = self.mean + self.std * torch.empty_like(self.mean).normal_(generator=generator)
        return torch.tanh(u), self._logp_of_u(u)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        with torch.no_grad():
            return torch.tanh(self.mean + self.std * torch.empty_like(self.mean).normal_(generator=generator))

    def deterministic_sample(self) -> torch.Tensor:
        return torch.tanh(self.mean)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self._logp_of_u(torch.atanh(actions.clamp(-_EDGE, _EDGE)))

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError("a tanh-squashed Gaussian has no closed-form entropy; SAC estimates it as -logp")


class NoisyDeterministic(Distribution):
    """Inputs are [action, sigma] concatenated on the last axis; the action is in [-1, 1]."""

    def __init__(self, inputs: torch.Tensor):
        self.action, self.sigma = torch.chunk(inputs, 2, dim=-1)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.empty_like(self.action).normal_(generator=generator)
        return (self.action + self.sigma * noise).clamp(-1.0, 1.0)

    def deterministic_sample(self) -> torch.Tensor:
        return self.action

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("a deterministic policy with exploration noise has no log-probabilities")

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError("a deterministic policy with exploration noise has no entropy")
