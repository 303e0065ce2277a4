"""Learner: one optimiser per trained policy, minibatch SGD over an algorithm's loss.

The algorithm supplies three things through its config: the loss function
`loss(module, minibatch, cfg) -> (loss, stats)`, the learner connectors run
once per policy batch (PPO: GAE, advantage standardisation), and the columns
the loss reads. Everything else (epochs, minibatches, clipping, versions,
observation-filter state) is here, shared by all algorithms.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from marl.connectors import MeanStdFilter
from marl.data import MultiAgentBatch, SampleBatch
from marl.modules import MultiRLModule, build_module


def _make_adam(params, lr: float, eps: float):
    try:  # fused Adam: one kernel per step instead of one per parameter tensor
        return torch.optim.Adam(params, lr=lr, eps=eps, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=lr, eps=eps)


def _as_tensor(array: np.ndarray) -> torch.Tensor:
    # Arrays that came through Ray's object store are read-only views; torch wants writable memory.
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array)
    return torch.from_numpy(array)


class Learner:
    def __init__(self, config, specs: dict):
        torch.set_num_threads(config.learners_cfg.num_threads)
        self.config = config
        self.train_cfg = config.training_cfg
        self.algo = config.algorithm_parts()
        seed = config.debugging_cfg.seed
        if seed is not None:
            torch.manual_seed(int(seed) + 1)
        self.rng = np.random.default_rng(None if seed is None else int(seed) + 2)
        self.specs = specs
        self.module = MultiRLModule(
            {pid: build_module(s.module_class, s.observation_space, s.action_space, config.model_for(pid)) for pid, s in specs.items()}
        )
        self.policies_to_train = config.trained_policy_ids(list(specs))
        self.optimizers = {
            pid: _make_adam(self.module[pid].parameters(), self.train_cfg.lr, self.train_cfg.adam_eps)
            for pid in self.policies_to_train
        }
        self.filters = (
            {pid: MeanStdFilter.empty_stats(self.module[pid].obs_dim) for pid in specs}
            if config.env_runners_cfg.observation_filter == "mean_std"
            else {}
        )
        self.version = 1  # runners start at 0: the first sync always sends

    # -- updates --------------------------------------------------------------
    def update(self, batch: MultiAgentBatch) -> dict[str, dict[str, float]]:
        """One learner update on a train batch: every trained policy that has rows in it."""
        for deltas in batch.info.get("connector_deltas", []):
            for pid, delta in deltas.items():
                self.filters[pid] = MeanStdFilter.merge(self.filters[pid], delta)
        results = {}
        for pid in self.policies_to_train:
            policy_batch = batch.policy_batches.get(pid)
            if policy_batch is not None and len(policy_batch):
                results[pid] = self._update_policy(pid, policy_batch)
        if results:
            self.version += 1
        return results

    def _update_policy(self, pid: str, batch: SampleBatch) -> dict[str, float]:
        cfg = self.train_cfg
        batch = SampleBatch(dict(batch.columns))  # connectors add columns to this view, not the caller's batch
        for connector in self.algo.learner_connectors(cfg):
            batch = connector(batch)
        module, optimizer = self.module[pid], self.optimizers[pid]
        module.train()
        tensors = {k: _as_tensor(batch[k]) for k in self.algo.loss_columns if k in batch}
        n = len(batch)
        size = min(cfg.minibatch_size, n)
        sums: dict[str, torch.Tensor] = {}
        steps = 0
        params = [p for p in module.parameters() if p.requires_grad]
        for _ in range(cfg.num_epochs):
            # Shuffle once per epoch; minibatches are then contiguous views, not gathers.
            order = torch.from_numpy(self.rng.permutation(n))
            shuffled = {k: t[order] for k, t in tensors.items()}
            for start in range(0, n, size):
                minibatch = {k: t[start : start + size] for k, t in shuffled.items()}
                loss, stats = self.algo.loss(module, minibatch, cfg)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip is not None:
                    stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                optimizer.step()
                for key, value in stats.items():
                    value = value.detach()
                    sums[key] = sums[key] + value if key in sums else value
                steps += 1
        module.eval()
        out = {key: float(value) / steps for key, value in sums.items()}
        out["num_sgd_steps"] = steps
        out["agent_steps_trained"] = n
        return out

    # -- weights --------------------------------------------------------------
    def get_weights(self) -> dict:
        return {
            "version": self.version,
            "modules": self.module.get_state(),
            "connectors": {pid: {k: (np.array(v) if k != "count" else v) for k, v in s.items()} for pid, s in self.filters.items()},
        }

    def set_weights(self, weights: dict) -> None:
        self.module.set_state(weights["modules"])
        for pid, state in weights.get("connectors", {}).items():
            self.filters[pid] = state
        self.version = weights["version"]

    def get_version(self) -> int:
        return self.version

    def get_optimizer_state(self) -> dict:
        return {pid: opt.state_dict() for pid, opt in self.optimizers.items()}

    def set_optimizer_state(self, state: dict) -> None:
        for pid, opt_state in state.items():
            self.optimizers[pid].load_state_dict(opt_state)

    # -- checkpoints ----------------------------------------------------------
    def get_state(self) -> dict:
        """Everything a checkpoint needs to continue this learner exactly (a tree of arrays and plain values).

        Subclasses that hold more (target networks, say) add entries; a checkpoint
        stores whatever tree this returns, without pickling.
        """
        return {
            "weights": self.get_weights(),
            "optimizers": self.get_optimizer_state(),
            "rng": {
                "numpy": self.rng.bit_generator.state,
                "torch": torch.get_rng_state(),
                "python": random.getstate(),
            },
        }

    def set_state(self, state: dict) -> None:
        self.set_weights(state["weights"])
        self.set_optimizer_state(state["optimizers"])
        rng = state.get("rng")
        if rng:
            self.rng.bit_generator.state = rng["numpy"]
            torch.set_rng_state(rng["torch"])
            random.setstate(rng["python"])

    def ping(self) -> str:
        return "ok"
