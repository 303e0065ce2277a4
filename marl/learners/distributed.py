"""Data-parallel learners: N `Learner` replicas on Ray actors, gradients averaged by DistributedDataParallel.

    PPOConfig()...learners(num_learners=2)

How one update runs on N ranks:

* every rank gets the whole train batch (put once in Ray's object store) and
  runs the learner connectors on it: GAE needs whole trajectory pieces, and
  the connectors are deterministic, so every rank computes the same columns;
* every rank walks the same minibatch schedule: the ranks share one seed, so
  they draw the same permutations, and `minibatch_size` keeps its meaning
  (rows per SGD step, all ranks together) whatever N is;
* of each minibatch, rank r takes its contiguous slice of about 1/N of the
  rows (of a recurrent module's minibatch: of its whole sequences, never cutting one) and computes each parameter group's loss on it inside the forward of
  that group's `DistributedDataParallel` wrapper (of the policy's module for
  the `default` group), scaled by its share of the rows; DDP averages the
  group's gradients across ranks during its backward. For a loss that is a
  mean over rows (PPO's, DQN's) the averaged gradient is exactly the gradient
  of the whole minibatch's loss, so every rank applies the same update, the
  weights stay identical, and N learners train like one (up to float
  rounding); the win is that each rank computes only its slice.

Backend: gloo for modules on the CPU, NCCL when `learners.num_gpus_per_learner` > 0
puts each rank's modules on its GPU (`marl.learners.device`; Ray gives each
rank actor its own GPU). Rank 0 picks the rendezvous address (its node's IP
and a free port).
"""

from __future__ import annotations

import datetime
import socket

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from marl.learners.learner import Learner
from marl.learners.sequences import SEQ_LENS, shard_bounds, shard_sequences
from marl.execution.user_code import actor_options

INIT_TIMEOUT_S = 120
_COUNTS = ("num_sgd_steps", "agent_steps_trained")  # stats that are counts, the same on every rank


def process_group_backend(on_gpu: bool) -> str:
    """NCCL for modules on GPUs (gradients all-reduced device to device), gloo on the CPU."""
    if on_gpu and not dist.is_nccl_available():
        raise RuntimeError("learners on GPUs average gradients over NCCL, but this torch build has no NCCL")
    return "nccl" if on_gpu else "gloo"


class _LossPass(nn.Module):
    """The module DDP wraps for one parameter group: it holds the parameters DDP syncs (the policy's
    whole module when the group owns all of it, as the `default` group does) and its `forward` runs the
    closure it is given, the group's loss. The loss calls whatever the module offers (`forward_train`,
    `q_values`, ...); what matters to DDP is that this forward ran before backward, which arms the
    gradient all-reduce of these parameters, and that every one of them then receives a gradient.
    Another group's backward may leave gradients on them while this wrapper is not armed: DDP ignores
    those, and this group's zero_grad clears them before its own backward."""

    def __init__(self, module: nn.Module, params: list[nn.Parameter]):
        super().__init__()
        if {id(p) for p in params} == {id(p) for p in module.parameters() if p.requires_grad}:
            self.module = module
        else:
            self.params = nn.ParameterList(params)  # the same tensors, not copies

    def forward(self, compute_loss):
        return compute_loss()


class DistributedLearner(Learner):
    """One rank of a data-parallel learner group (a Ray actor; see `LearnerGroup`)."""

    def __init__(self, config, specs: dict, rank: int, world_size: int):
        super().__init__(config, specs)
        self.rank, self.world_size = rank, world_size
        self._ddp: dict[tuple[str, str], DistributedDataParallel] = {}  # (pid, group name) -> its wrapper
        self._per_row_stats: set[str] = set()

    def rendezvous_address(self) -> tuple[str, int]:
        """Rank 0's node IP and a free TCP port, where the process group meets."""
        import ray

        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def init_process_group(self, host: str, port: int) -> str:
        """Joins the group (blocks until all ranks joined) and wraps every trainable parameter group in DDP."""
        modules = [self.module[pid] for pid in self.policies_to_train]
        on_gpu = any(p.is_cuda for m in modules for p in m.parameters())
        backend = process_group_backend(on_gpu)
        dist.init_process_group(
            backend,
            init_method=f"tcp://{host}:{port}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(seconds=INIT_TIMEOUT_S),
        )
        for pid in self.policies_to_train:
            for group in self.groups[pid]:
                if group.trainable:
                    # Construction broadcasts rank 0's parameters, so the replicas start identical.
                    wrapper = _LossPass(self.module[pid], self._clipped[pid][group.name])
                    self._ddp[(pid, group.name)] = DistributedDataParallel(wrapper)
            self._per_row_stats.update(self.parts[pid].per_row_stats)  # DQN's TD errors, say
        return backend

    def _group_loss(self, pid: str, group, module, minibatch: dict, cfg, targets: dict):
        """The group's loss on this rank's slice of the minibatch, through the group's DDP wrapper."""
        if SEQ_LENS in minibatch:  # a recurrent module's minibatch: each rank takes whole sequences
            shard, rows, n = shard_sequences(minibatch, self.rank, self.world_size)
            share, lo, hi = rows / n, 0, rows
        else:
            n = len(next(iter(minibatch.values())))
            lo, hi = shard_bounds(n, self.rank, self.world_size)
            share = (hi - lo) / n
            if hi == lo:  # fewer rows than ranks: run one row with weight 0 so DDP still hears from every parameter
                lo, hi = 0, 1
            shard = {k: v[lo:hi] for k, v in minibatch.items()}
        loss, stats = self._ddp[(pid, group.name)](lambda: group.loss(module, shard, cfg, targets))
        # DDP averages over ranks; weighting each rank's mean by (its rows / mean rows) makes that average
        # the mean over all the minibatch's rows, also when the slices differ in size.
        loss = loss * (share * self.world_size)
        return loss, self.scale_stats(stats, share, n, (hi - lo) if share else 0)

    def scale_stats(self, stats: dict, share: float, n: int, rows: int) -> dict:
        """This rank's part of the minibatch's stats, no communication for scalars.

        A scalar stat (a mean over this rank's rows) is scaled like the loss, so that
        the mean over ranks, taken once per update in `_update_policy`, is the mean
        over all rows. Per-row stats (DQN's TD errors) are gathered in row order now:
        the learner writes them back per minibatch.
        """
        scale = share * self.world_size
        out = {}
        for key, value in stats.items():
            if key in self._per_row_stats:
                out[key] = self._gather_rows(value.detach()[:rows], n)
            elif torch.is_tensor(value) and value.dim() == 0:
                out[key] = value.detach() * scale
            else:
                out[key] = value
        return out

    def _update_policy(self, pid: str, batch):
        out = super()._update_policy(pid, batch)
        # One all-reduce per update for the reported stats (the mean over ranks of each rank's scaled
        # stats); grad_norm is the same on every rank already (taken after DDP averaged the gradients).
        keys = [k for k, v in out.items() if isinstance(v, float) and k not in _COUNTS]
        if keys:
            packed = torch.tensor([out[k] for k in keys], dtype=torch.float64, device=self.device)  # NCCL: on the GPU
            dist.all_reduce(packed)
            packed /= self.world_size
            out.update({k: float(packed[i]) for i, k in enumerate(keys)})
        return out

    def _gather_rows(self, local: torch.Tensor, n: int) -> torch.Tensor:
        sizes = [shard_bounds(n, r, self.world_size) for r in range(self.world_size)]
        width = max(hi - lo for lo, hi in sizes)
        padded = torch.zeros((width,) + tuple(local.shape[1:]), dtype=local.dtype, device=local.device)
        padded[: len(local)] = local
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded)
        return torch.cat([p[: hi - lo] for p, (lo, hi) in zip(parts, sizes)])


def start_distributed_learners(config, specs: dict, num_learners: int) -> list:
    """N `DistributedLearner` actors in one process group; returns them in rank order."""
    import ray

    if config.debugging_cfg.seed is None:
        # The ranks must draw the same minibatch permutations: give them one seed.
        config = config.copy()
        config.debugging_cfg.seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)

    cls = ray.remote(num_cpus=config.learners_cfg.num_cpus_per_learner,
                     num_gpus=config.learners_cfg.num_gpus_per_learner, **actor_options(config))(DistributedLearner)
    actors = [cls.remote(config, specs, rank, num_learners) for rank in range(num_learners)]
    host, port = ray.get(actors[0].rendezvous_address.remote())
    ray.get([a.init_process_group.remote(host, port) for a in actors])
    return actors
