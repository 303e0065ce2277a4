r"""HATRPO's step (Kuba et al., ICLR 2022, Algorithm 2; HARL, JMLR 2024): HAPPO's sequential scheme with each
agent's actor moved by a trust-region step instead of clipped SGD.

Agent $i_m$ (in this iteration's random order) maximises the surrogate of its advantages weighted by the earlier
agents' ratios, $M^{i_{1:m}} = \big(\prod_{j<m} r^{i_j}\big)\hat A$ (`marl.algorithms.happo.loss`), within a KL ball:

$$\max_\theta \; L(\theta) = \mathbb{E}\Big[\frac{\pi_\theta^{i_m}(a^{i_m} \mid o^{i_m})}{\pi_{old}^{i_m}(a^{i_m} \mid o^{i_m})}
   M^{i_{1:m}}(s, \mathbf{a})\Big] \quad \text{s.t.} \quad
   \bar D_{KL}\big(\pi_{old}^{i_m} \,\|\, \pi_\theta^{i_m}\big) \le \delta$$

solved as TRPO does: $g = \nabla_\theta L$, the natural direction $x \approx H^{-1} g$ by `cg_iters` steps of
conjugate gradient on Fisher-vector products $Hv + \lambda v$ ($H$ the Hessian of the mean KL, $\lambda$ =
`cg_damping`), the full step $\beta x$ with $\beta = \sqrt{2\delta / x^\top H x}$, then a backtracking line search
over $\alpha^k \beta x$ ($\alpha$ = `backtrack_coeff`, $k < $ `line_search_steps`) that takes the first step with
$\bar D_{KL} \le \delta$, an improvement $L(\theta_k) - L(\theta_{old}) > 0$ and at least `accept_ratio` of the
improvement the linear model expects ($g^\top \alpha^k \beta x$); where none qualifies the actor stays as it was.

The step runs once per update on the whole batch (the learner's `prepare` pass, before the critic's epochs); the
critic (each policy's centralised value function, `value_loss`) trains with Adam on the clipped value loss.
"""

from __future__ import annotations

import torch

from marl.algorithms.happo.loss import FACTOR, weighted_advantages
from marl.data import sample_batch as sb
from marl.modules.popart import normalise_value_targets

STEP_STATS = "hatrpo_step"  # the prepare pass's stats, one row each, returned by the critic's loss


def critic_parameters(module) -> list[torch.nn.Parameter]:
    """The value function's parameters: its head `vf` and the encoder of the state it reads (`state_encoder`)."""
    if not hasattr(module, "vf"):
        raise ValueError(f"HATRPO moves the actor and fits the critic apart: module {type(module).__name__} needs a "
                         "value head `vf` (and, where it has one, a `state_encoder`), as CentralCriticMLP has")
    critic = list(module.vf.parameters())
    if hasattr(module, "state_encoder"):
        critic += list(module.state_encoder.parameters())
    return critic


def actor_parameters(module) -> list[torch.nn.Parameter]:
    critic = {id(p) for p in critic_parameters(module)}
    return [p for p in module.parameters() if id(p) not in critic and p.requires_grad]


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def _set_flat(params: list[torch.nn.Parameter], flat: torch.Tensor) -> None:
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(flat[offset:offset + n].view_as(p))
            offset += n


def conjugate_gradient(fvp, b: torch.Tensor, iters: int, residual_tol: float = 1e-10) -> torch.Tensor:
    """x with (H + damping) x = b, by `iters` steps of conjugate gradient (`fvp(v)` gives the product)."""
    x, r = torch.zeros_like(b), b.clone()
    p, rr = b.clone(), r.dot(r)
    for _ in range(iters):
        hp = fvp(p)
        alpha = rr / p.dot(hp)
        x += alpha * p
        r -= alpha * hp
        new_rr = r.dot(r)
        if new_rr < residual_tol:
            break
        p = r + (new_rr / rr) * p
        rr = new_rr
    return x


def trpo_step(module, tensors: dict[str, torch.Tensor], cfg) -> dict[str, torch.Tensor]:
    """`prepare`: one KL-constrained step of the actor on the whole batch (the docstring's algorithm)."""
    batch = weighted_advantages(tensors)
    params = actor_parameters(module)
    actions, old_logp, weighted = batch[sb.ACTIONS], batch[sb.ACTION_LOGP], batch[sb.ADVANTAGES]
    with torch.no_grad():
        old_dist = module.action_dist(module.forward_train(batch)["action_dist_inputs"])

    def surrogate_and_kl(grad: bool = False):
        with torch.set_grad_enabled(grad):
            dist = module.action_dist(module.forward_train(batch)["action_dist_inputs"])
            surrogate = ((dist.logp(actions) - old_logp).exp() * weighted).mean()
            return surrogate, old_dist.kl(dist).mean()

    surrogate, _ = surrogate_and_kl(grad=True)
    g = _flat(torch.autograd.grad(surrogate, params))

    def fisher_vector_product(v: torch.Tensor) -> torch.Tensor:
        _, kl = surrogate_and_kl(grad=True)
        kl_grad = _flat(torch.autograd.grad(kl, params, create_graph=True))
        return _flat(torch.autograd.grad(kl_grad.dot(v), params)) + cfg.cg_damping * v

    direction = conjugate_gradient(fisher_vector_product, g, cfg.cg_iters)
    shs = 0.5 * direction.dot(fisher_vector_product(direction))
    full_step = direction * torch.sqrt(cfg.kl_threshold / shs.clamp(min=1e-12))  # beta x: 0.5 (beta x)' H (beta x) = delta
    expected = g.dot(full_step)
    old_params = _flat([p.detach() for p in params]).clone()
    accepted, fraction, kl, improvement = 0.0, 1.0, torch.zeros(()), torch.zeros(())
    for _ in range(cfg.line_search_steps):
        _set_flat(params, old_params + fraction * full_step)
        new_surrogate, kl = surrogate_and_kl()
        improvement = new_surrogate - surrogate.detach()
        if kl <= cfg.kl_threshold and improvement > 0 and improvement / (fraction * expected) > cfg.accept_ratio:
            accepted = fraction
            break
        fraction *= cfg.backtrack_coeff
    else:
        _set_flat(params, old_params)  # no step qualified: the actor stays
        kl, improvement = torch.zeros(()), torch.zeros(())
    n = len(actions)
    stats = torch.stack([torch.as_tensor(accepted, dtype=torch.float32), kl.float(), improvement.float(),
                         batch[FACTOR].mean().float()])
    return {**tensors, STEP_STATS: stats.expand(n, 4)}


def value_loss(module, batch: dict[str, torch.Tensor], cfg, targets=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The critic's loss: MAPPO's clipped value loss (with PopArt in units of the targets' std)."""
    value_std = normalise_value_targets(module, batch[sb.VALUE_TARGETS])
    v = module.forward_train(batch)["vf_preds"]
    v_old, target, scale = batch[sb.VF_PREDS], batch[sb.VALUE_TARGETS], value_std or 1.0
    v_clipped = v_old + (v - v_old).clamp(-cfg.vf_clip_param * scale, cfg.vf_clip_param * scale)
    vf_loss = 0.5 * torch.max((v - target).pow(2), (v_clipped - target).pow(2)).mean() / scale**2
    step = batch[STEP_STATS][0]
    return vf_loss, {"vf_loss": vf_loss, "step_fraction": step[0], "kl": step[1], "surrogate_gain": step[2],
                     "factor_mean": step[3]}
