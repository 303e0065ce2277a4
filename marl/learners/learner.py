"""Learner: one optimiser per trained policy, minibatch SGD over an algorithm's loss.

The algorithm supplies, through `config.parts_for(policy_id)` (its
`algorithm_parts()`, or in a MIXED run the parts of the policy's own algorithm): the loss
`loss(module, minibatch, cfg, target=None) -> (loss, stats)`, the learner
connectors run once per policy batch (PPO: GAE), an optional `prepare` pass
that adds columns computed with the current network before the epochs
(APPO/IMPALA: V-trace targets), whether each policy keeps a target network
(DQN), and which stats are per-row (DQN: TD errors for replay priorities).
Everything else (epochs, minibatches, clipping, versions, target updates,
observation-filter state) is here, shared by all algorithms. Each policy has
its own parts, training section and optimiser, so one learner can update a
PPO policy and a DQN policy side by side.
"""

from __future__ import annotations

import copy
import random

import numpy as np
import torch

from marl.connectors import MeanStdFilter
from marl.data import MultiAgentBatch, SampleBatch
from marl.learners.adam import make_adam
from marl.modules import MultiRLModule, build_module


def _as_tensor(array: np.ndarray) -> torch.Tensor:
    # Arrays that came through Ray's object store are read-only views; torch wants writable memory.
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array)
    return torch.from_numpy(array)


class Learner:
    def __init__(self, config, specs: dict):
        torch.set_num_threads(config.learners_cfg.num_threads)
        self.config = config
        seed = config.debugging_cfg.seed
        if seed is not None:
            torch.manual_seed(int(seed) + 1)
        self.rng = np.random.default_rng(None if seed is None else int(seed) + 2)
        self.specs = specs
        self.module = MultiRLModule(
            {pid: build_module(config.module_class_for(s), s.observation_space, s.action_space, config.model_for(pid)) for pid, s in specs.items()}
        )
        self.policies_to_train = config.trained_policy_ids(list(specs))
        self.parts = {pid: config.parts_for(pid) for pid in self.policies_to_train}
        self.train_cfgs = {pid: config.training_for(pid) for pid in self.policies_to_train}
        self.optimizers = {
            pid: make_adam(self.module[pid].parameters(), self.train_cfgs[pid].lr, self.train_cfgs[pid].adam_eps)
            for pid in self.policies_to_train
        }
        self.filters = (
            {pid: MeanStdFilter.empty_stats(self.module[pid].obs_dim) for pid in specs}
            if config.env_runners_cfg.observation_filter == "mean_std"
            else {}
        )
        # Target networks: frozen copies, refreshed by `update_target` (an `update_target` node in the graph).
        self.targets = {}
        for pid in self.policies_to_train:
            if self.parts[pid].uses_target_network:
                target = copy.deepcopy(self.module[pid])
                target.requires_grad_(False)
                target.eval()
                self.targets[pid] = target
        self.version = 1  # runners start at 0: the first sync always sends

    # -- updates --------------------------------------------------------------
    def update(self, batch: MultiAgentBatch, connector_deltas=()) -> dict[str, dict[str, float]]:
        """One learner update on a train batch: every trained policy that has rows in it.

        `connector_deltas`: the runners' observation-filter deltas of the sample calls the batch came from."""
        for deltas in connector_deltas:
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

    def _update_policy(self, pid: str, batch: SampleBatch) -> dict:
        cfg = self.train_cfgs[pid]
        algo = self.parts[pid]
        batch = SampleBatch(dict(batch.columns))  # connectors add columns to this view, not the caller's batch
        for connector in algo.learner_connectors(cfg):
            batch = connector(batch)
        module, optimizer, target = self.module[pid], self.optimizers[pid], self.targets.get(pid)
        tensors = {k: _as_tensor(batch[k]) for k in algo.loss_columns if k in batch}
        tensors = algo.prepare(module, tensors, cfg)
        module.train()
        n = len(batch)
        size = min(getattr(cfg, "minibatch_size", n) or n, n)
        num_epochs = getattr(cfg, "num_epochs", 1)
        sums: dict[str, torch.Tensor] = {}
        per_row = {key: np.zeros(n, dtype=np.float32) for key in algo.per_row_stats}
        steps = 0
        params = [p for p in module.parameters() if p.requires_grad]
        for _ in range(num_epochs):
            if num_epochs == 1 and size == n:
                order, shuffled = None, tensors  # one step on the whole batch: nothing to shuffle
            else:
                # Shuffle once per epoch; minibatches are then contiguous views, not gathers.
                order = torch.from_numpy(self.rng.permutation(n))
                shuffled = {k: t[order] for k, t in tensors.items()}
            for start in range(0, n, size):
                minibatch = {k: t[start : start + size] for k, t in shuffled.items()}
                loss, stats = algo.loss(module, minibatch, cfg, target=target)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip is not None:
                    stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                optimizer.step()
                for key in per_row:  # rows back in batch order (the last epoch's values win)
                    rows = slice(start, start + size) if order is None else order[start : start + size].numpy()
                    per_row[key][rows] = stats.pop(key).detach().numpy()
                for key, value in stats.items():
                    value = value.detach()
                    sums[key] = sums[key] + value if key in sums else value
                steps += 1
        module.eval()
        out: dict = {key: float(value) / steps for key, value in sums.items()}
        out["num_sgd_steps"] = steps
        out["agent_steps_trained"] = n
        out.update(per_row)
        return out

    def update_target(self, tau: float = 1.0, policies: list[str] | None = None) -> list[str]:
        """target <- tau * online + (1 - tau) * target for every trained policy (or those named); returns their ids."""
        targets = {pid: t for pid, t in self.targets.items() if policies is None or pid in policies}
        with torch.no_grad():
            for pid, target in targets.items():
                online = self.module[pid].state_dict()
                for name, value in target.state_dict().items():
                    if tau >= 1.0 or not value.is_floating_point():
                        value.copy_(online[name])
                    else:
                        value.lerp_(online[name], tau)
        return list(targets)

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

    def get_target_state(self) -> dict:
        return {pid: t.get_state() for pid, t in self.targets.items()}

    def set_target_state(self, state: dict) -> None:
        for pid, target_state in state.items():
            self.targets[pid].set_state(target_state)

    def get_optimizer_state(self) -> dict:
        return {pid: opt.state_dict() for pid, opt in self.optimizers.items()}

    def set_optimizer_state(self, state: dict) -> None:
        """Adam's moments and step counts from a checkpoint; lr and eps stay this config's.

        load_state_dict would also bring back the saved hyperparameters, and then
        `--resume RUN_DIR training.lr=X` would silently train with the old rate.
        """
        for pid, opt_state in state.items():
            optimizer, cfg = self.optimizers[pid], self.train_cfgs[pid]
            optimizer.load_state_dict(opt_state)
            for group in optimizer.param_groups:
                group["lr"], group["eps"] = cfg.lr, cfg.adam_eps

    # -- checkpoints ----------------------------------------------------------
    def get_state(self) -> dict:
        """Everything a checkpoint needs to continue this learner exactly (a tree of arrays and plain values).

        A checkpoint stores whatever tree this returns (a subclass holding more
        adds entries), without pickling.
        """
        return {
            "weights": self.get_weights(),
            "optimizers": self.get_optimizer_state(),
            "targets": self.get_target_state(),
            "rng": {
                "numpy": self.rng.bit_generator.state,
                "torch": torch.get_rng_state(),
                "python": random.getstate(),
            },
        }

    def set_state(self, state: dict) -> None:
        self.set_weights(state["weights"])
        self.set_optimizer_state(state["optimizers"])
        targets = state.get("targets")
        if targets:
            self.set_target_state({pid: t for pid, t in targets.items() if pid in self.targets})
        elif self.targets:  # a checkpoint without target networks: start them from the restored weights
            self.update_target(1.0)
        rng = state.get("rng")
        if rng:
            self.rng.bit_generator.state = rng["numpy"]
            torch.set_rng_state(rng["torch"])
            random.setstate(rng["python"])

    def ping(self) -> str:
        return "ok"
