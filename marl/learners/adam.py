"""Adam for the learner: torch's fused Adam kernel, without `torch.optim`'s start-up cost.

`torch.optim.Optimizer` imports `torch._dynamo` the first time it adds a parameter
group and on every `step()` (to guard against graph capture): about 1.1 s on these
CPUs, a third of a run's time to its first result. `FusedAdam` calls the kernel
`torch.optim.Adam(fused=True)` calls (`torch._fused_adam_`, after the same step-count
increment) on the same state layout, so its updates are bit-identical to it and its
`state_dict()` is interchangeable with it (checkpoints written by either load in either).

`make_adam` picks it where the fused CPU kernel exists (torch >= 2.4), and otherwise
falls back to `torch.optim.Adam`.
"""

from __future__ import annotations

import torch

DEFAULT_BETAS = (0.9, 0.999)


class FusedAdam:
    """Adam (no weight decay, no amsgrad) over one group of parameters, the subset of
    `torch.optim.Adam`'s interface the learner uses: `param_groups` (lr and eps are read
    at every step), `zero_grad`, `step`, `state_dict`, `load_state_dict`."""

    def __init__(self, params, lr: float, eps: float, betas: tuple[float, float] = DEFAULT_BETAS):
        self.params: list[torch.Tensor] = list(params)
        self.param_groups = [{
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": 0.0, "amsgrad": False, "maximize": False,
            "foreach": None, "capturable": False, "differentiable": False, "fused": True,
            "decoupled_weight_decay": False, "params": self.params,
        }]
        self.state: dict[int, dict[str, torch.Tensor]] = {}  # index in `params` -> step, exp_avg, exp_avg_sq

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            state = self.state.get(i)
            if state is None:  # what torch.optim.Adam(fused=True) creates on a parameter's first step
                state = self.state[i] = {
                    "step": torch.zeros((), dtype=torch.float32, device=p.device),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            params, grads, exp_avgs, exp_avg_sqs, [], steps,
            amsgrad=False, lr=group["lr"], beta1=beta1, beta2=beta2, weight_decay=0.0, eps=group["eps"],
            maximize=False, grad_scale=None, found_inf=None,
        )

    def state_dict(self) -> dict:
        """`torch.optim.Adam.state_dict()`'s layout: state by parameter index, the group with indices."""
        group = {**self.param_groups[0], "params": list(range(len(self.params)))}
        return {"state": {i: dict(s) for i, s in self.state.items()}, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"optimizer state holds {[len(g['params']) for g in groups]} parameters in {len(groups)} group(s); "
                f"this module has {len(self.params)} in 1"
            )
        saved = state_dict["state"]
        new_state = {}
        for i, p in enumerate(self.params):
            s = saved.get(i)
            if s is None:
                continue
            for key in ("exp_avg", "exp_avg_sq"):
                if tuple(s[key].shape) != tuple(p.shape):
                    raise ValueError(f"optimizer state for parameter {i}: {key} has shape {tuple(s[key].shape)}, "
                                     f"the parameter {tuple(p.shape)}")
            new_state[i] = {
                "step": torch.as_tensor(s["step"], dtype=torch.float32, device=p.device).clone(),
                "exp_avg": torch.as_tensor(s["exp_avg"]).to(p.device, p.dtype).clone(),
                "exp_avg_sq": torch.as_tensor(s["exp_avg_sq"]).to(p.device, p.dtype).clone(),
            }
        self.state = new_state
        saved_group = groups[0]
        self.param_groups[0].update(
            lr=saved_group["lr"], eps=saved_group["eps"], betas=tuple(float(b) for b in saved_group["betas"])
        )


def _fused_kernel_works() -> bool:
    if not hasattr(torch, "_fused_adam_"):
        return False
    p = torch.zeros(1, requires_grad=True)
    p.grad = torch.ones(1)
    try:
        FusedAdam([p], lr=1e-3, eps=1e-8).step()
    except (RuntimeError, TypeError, NotImplementedError):  # no fused CPU kernel in this torch build
        return False
    return True


_FUSED_OK: bool | None = None


def make_adam(params, lr: float, eps: float, betas: tuple[float, float] = DEFAULT_BETAS):
    """`FusedAdam` where torch has the fused kernel for CPU tensors; `torch.optim.Adam` otherwise."""
    global _FUSED_OK
    params = list(params)
    if _FUSED_OK is None:
        _FUSED_OK = _fused_kernel_works()
    if _FUSED_OK and all(p.device.type == "cpu" for p in params):
        return FusedAdam(params, lr=lr, eps=eps, betas=betas)
    try:
        return torch.optim.Adam(params, lr=lr, eps=eps, betas=betas, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=lr, eps=eps, betas=betas)
