"""Learner: minibatch SGD over each trained policy's parameter groups.

The algorithm supplies, through `config.plan_for(policy_id).parts` (its
`algorithm_parts()`, or in a MIXED run the parts of the policy's own algorithm):
its parameter groups (each an optimiser with its own loss term, gradient clip and
schedule), its target copies, how batches are cut into minibatches (the contract:
`marl.learners.param_groups`), the learner connectors run once per policy batch
(PPO: GAE), an optional `prepare` pass that adds columns computed with the current
network before the epochs (APPO/IMPALA: V-trace targets), an optional `finish` pass
that returns per-row columns of the updated network (HAPPO: the new log-probs), and which stats are
per-row (DQN: TD errors for replay priorities). Everything else (epochs, minibatches, clipping, versions, target
updates, observation-filter state) is here, shared by all algorithms. Each policy has its own parts, training section
and optimisers, so one learner can update a PPO policy and a DQN policy side by side.
A stateful (recurrent) module trains on sequences: chunks of its trajectory pieces,
shuffled whole (`marl.learners.sequences`), checked once against its acting pass.
"""

from __future__ import annotations

import copy
import random

import numpy as np
import torch
from torch import nn

from marl.connectors import LearnerConnectors, build_policy_module
from marl.data import MultiAgentBatch, SampleBatch
from marl.data import sample_batch as sb
from marl.execution.cores import learner_threads
from marl.learners import sequences as seq
from marl.learners.adam import make_adam
from marl.learners.compiled import compiled_losses, compiled_share
from marl.learners.device import learner_device, to_device
from marl.learners.memory import keep_freed_memory
from marl.learners.param_groups import DEFAULT_GROUP, ParamGroup, check_declared
from marl.modules import MultiRLModule
from marl.modules.q_mlp import piecewise_linear
from marl.modules.recurrent import recurrent_options
from marl.modules.rl_module import load_network_state, network_state
from marl.replay.sequences import DETACH_AT, SEQ_MASK, first_loss_steps


def _as_tensor(array: np.ndarray | torch.Tensor) -> torch.Tensor:
    if isinstance(array, torch.Tensor):  # a batched runner's column: as it is, where it is
        return array
    # Arrays that came through Ray's object store are read-only views; torch wants writable memory.
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array)
    return torch.from_numpy(array)


def _frozen_copy(network: nn.Module) -> nn.Module:
    return copy.deepcopy(network).requires_grad_(False).eval()


def _named(table: dict, name: str, what: str):
    if name not in table:
        raise ValueError(
            f"the checkpoint holds state of {what} named '{name}'; this algorithm declares {sorted(table)}"
        )
    return table[name]


def _owned_parameters(policy_id: str, module: nn.Module, groups: list[ParamGroup]) -> dict[str, list[nn.Parameter]]:
    """Each group's trainable parameters, in the order it declares them; a parameter belongs to one group at most.
    Frozen ones (requires_grad false: PopArt's scale, `marl.modules.popart`) are no optimiser's."""
    owned, owner = {}, {}
    for group in groups:
        params = [p for p in group.params(module) if p.requires_grad]
        for p in params:
            if id(p) in owner:
                name = next((n for n, q in module.named_parameters() if q is p), f"of shape {tuple(p.shape)}")
                raise ValueError(
                    f"policy '{policy_id}': parameter groups '{owner[id(p)]}' and '{group.name}' both own "
                    f"parameter {name}; each parameter belongs to one group"
                )
            owner[id(p)] = group.name
        owned[group.name] = params
    return owned


def _whole_batch(tensors: dict, tables: dict) -> dict:
    """Every row with its table values joined, for a pass over the whole batch (one gather per update: the
    minibatches keep joining their own rows)."""
    return {**tensors, **{name: table[tensors[sb.table_index(name)]] for name, table in tables.items()}}


def _prepared(algo, module, tensors: dict, tables: dict, cfg) -> dict:
    """The algorithm's `prepare` pass over the whole batch. It sees every row's table values (a MAPPO critic
    reads the state: overlap's proximal log-probs run the module)."""
    if not tables:
        return algo.prepare(module, tensors, cfg)
    return {k: v for k, v in algo.prepare(module, _whole_batch(tensors, tables), cfg).items() if k not in tables}


class Learner:
    def __init__(self, config, specs: dict):
        config = config.as_built()  # (made straight from an unbuilt config: its `auto` keys set, as build does)
        self.threads = learner_threads(config)  # (threads, why): `learners.num_threads` or the cores it owns
        torch.set_num_threads(self.threads[0])
        keep_freed_memory()  # minibatch activations reuse the heap instead of faulting in fresh pages each step
        self.config = config
        seed = config.debugging_cfg.seed
        if seed is not None:
            torch.manual_seed(int(seed) + 1)
        self.rng = np.random.default_rng(None if seed is None else int(seed) + 2)
        self.specs = specs
        self.device = learner_device(config.learners_cfg.num_gpus_per_learner)
        self.module = MultiRLModule({pid: build_policy_module(config, pid, s) for pid, s in specs.items()})
        self.module.to(self.device)  # before the optimisers and target copies are made: they follow the parameters
        self.policies_to_train = config.trained_policy_ids(list(specs))
        self.plans = {pid: config.plan_for(pid) for pid in self.policies_to_train}
        self.parts = {pid: plan.parts for pid, plan in self.plans.items()}
        self.train_cfgs = {pid: plan.training for pid, plan in self.plans.items()}
        self.minibatching = {pid: self.parts[pid].minibatching(self.train_cfgs[pid]) for pid in self.policies_to_train}
        # Parameter groups, in update order; the optimisers of the trainable ones (frozen ones take no gradients).
        self.groups: dict[str, list[ParamGroup]] = {}
        self.group_params: dict[str, dict[str, list[nn.Parameter]]] = {}
        self.optimizers: dict[str, dict] = {}  # pid -> group name -> Adam
        self._clipped: dict[str, dict[str, list[nn.Parameter]]] = {}  # the parameters each group's grad_clip spans
        self.sgd_steps = {pid: 0 for pid in self.policies_to_train}  # minibatch steps so far: the groups' schedules
        # Target copies: frozen, refreshed by `update_target` (an `update_target` node in the graph).
        self.targets: dict[str, dict[str, nn.Module]] = {}
        self._target_sources: dict[str, dict] = {}  # pid -> copy name -> the `of` of its TargetCopy
        for pid in self.policies_to_train:
            module, cfg = self.module[pid], self.train_cfgs[pid]
            groups, copies = self.parts[pid].param_groups(cfg), self.parts[pid].target_copies(cfg)
            check_declared(pid, groups, copies)
            if config.learners_cfg.compile_loss:  # the same terms, traced and fused (`marl.learners.compiled`)
                groups = compiled_losses(pid, groups)
            self.groups[pid] = groups
            self.group_params[pid] = _owned_parameters(pid, module, groups)
            self.optimizers[pid] = {}
            for group in groups:
                params = self.group_params[pid][group.name]
                if group.trainable:
                    self.optimizers[pid][group.name] = make_adam(params, group.lr, group.eps, group.betas)
                else:
                    for p in params:
                        p.requires_grad_(False)
            self._clipped[pid] = {
                g.name: [p for p in self.group_params[pid][g.name] if p.requires_grad] for g in groups if g.trainable
            }
            if copies:
                self.targets[pid] = {c.name: _frozen_copy(c.of(module)) for c in copies}
                self._target_sources[pid] = {c.name: c.of for c in copies}
        # Stateful modules train on sequences of at most max_seq_len steps; the first update checks that
        # their training pass reproduces acting (`debugging.check_module_state`).
        self.max_seq_len = {
            pid: recurrent_options(self.plans[pid].model)[2]
            for pid in self.policies_to_train if self.module[pid].get_initial_state()
        }
        self._check_state = {pid: config.debugging_cfg.check_module_state for pid in self.max_seq_len}
        # Learner connector pipelines, and the central statistics of runner pieces (mean/std filter).
        self.connectors = LearnerConnectors(config, specs, self.policies_to_train)
        self.version = 1  # runners start at 0: the first sync always sends

    # -- updates --------------------------------------------------------------
    def update(self, batch: MultiAgentBatch, connector_deltas=(), env_steps: int | None = None) -> dict[str, dict[str, float]]:
        """One learner update on a train batch: every trained policy that has rows in it.

        `connector_deltas`: the runners' connector-statistics deltas of the sample calls the batch came from;
        `env_steps`: the run's env steps so far, where `learners.lr_multiplier` reads its factor."""
        self.connectors.merge(list(connector_deltas))
        self._scale_learning_rates(env_steps)
        results = {}
        # The learner's threads for the update only: an in-process runner sets one for its small forward passes.
        threads = torch.get_num_threads()
        torch.set_num_threads(self.threads[0])
        try:
            for pid in self.policies_to_train:
                policy_batch = batch.policy_batches.get(pid)
                if policy_batch is not None and len(policy_batch):
                    results[pid] = self._update_policy(pid, policy_batch)
        finally:
            torch.set_num_threads(threads)
        if results:
            self.version += 1
        return results

    def _scale_learning_rates(self, env_steps: int | None) -> None:
        """Every trained group's rate: its configured one times `learners.lr_multiplier` at `env_steps` (set anew each
        update from the run's counter, so a resumed run continues the schedule where it was)."""
        schedule = self.config.learners_cfg.lr_multiplier
        if schedule is None or env_steps is None:
            return
        factor = piecewise_linear(schedule, env_steps)
        for pid, groups in self.groups.items():
            for spec in (g for g in groups if g.trainable):
                for group in self.optimizers[pid][spec.name].param_groups:
                    group["lr"] = spec.lr * factor

    def _update_policy(self, pid: str, batch: SampleBatch) -> dict:
        cfg = self.train_cfgs[pid]
        algo = self.parts[pid]
        batch = SampleBatch(dict(batch.columns), batch.tables)  # connectors add columns to this view, not the caller's batch
        batch = self.connectors.run(pid, batch, algo.learner_connectors(cfg))
        module, targets = self.module[pid], self.targets.get(pid, {})
        # Tables (MAPPO's state: one row per env step) stay shared; each minibatch joins its own rows.
        # Both moved to the learner's device once per update (a no-op on the CPU), never per minibatch.
        tables = {k: _as_tensor(batch.tables[k]) for k in algo.loss_columns if k in batch.tables}
        if tables:
            tables = to_device(tables, self.device)
        tensors = {k: _as_tensor(batch[k]) for k in algo.loss_columns if k in batch and k not in tables}
        tensors.update({sb.table_index(k): _as_tensor(batch[sb.table_index(k)]) for k in tables})
        plan = self.minibatching[pid]
        sequences = None
        # (Replayed sequences of recurrent VDN/QMIX agents are one row each, with their starting states: plain rows here.)
        names = seq.state_names(module) if pid in self.max_seq_len else []
        if names and sb.state_in_column(names[0]) in batch:  # a stateful module trains on chunks of its trajectory pieces
            sequences = seq.SequencePlan(batch[sb.SEGMENT_END], self.max_seq_len[pid])
            tensors = seq.add_sequences(tensors, batch, sequences, names)
        policy_plan = self.plans[pid]
        if policy_plan.burn_in and not policy_plan.burn_in_grad and SEQ_MASK in tensors:  # R2D2's burn-in
            tensors[DETACH_AT] = first_loss_steps(tensors[SEQ_MASK])
        tensors = to_device(tensors, self.device)
        if sequences is not None and self._check_state.pop(pid, False):
            seq.check_acting_matches_training(pid, module, tensors)
        tensors = _prepared(algo, module, tensors, tables, cfg)
        module.train()
        n = len(batch)
        groups = algo.update_order([g for g in self.groups[pid] if g.trainable], self.rng)  # (declared, unless it draws one)
        sums: dict[str, dict[str, torch.Tensor]] = {g.name: {} for g in groups}
        group_steps = {g.name: 0 for g in groups}
        per_row = {key: np.zeros(n, dtype=np.float32) for key in algo.per_row_stats}
        steps = 0
        if sequences is not None:
            minibatches = seq.sequence_minibatches(tensors, sequences, plan.minibatch_size, plan.num_epochs, self.rng)
        else:
            minibatches = self._row_minibatches(tensors, n, plan)
        for rows, minibatch in minibatches:
            for name, table in tables.items():
                minibatch[name] = table[minibatch[sb.table_index(name)]]
            for group in groups:  # declared order: a later group's loss sees the earlier groups' new weights
                if self.sgd_steps[pid] % group.every:
                    continue
                stats = self._step_group(pid, group, module, minibatch, cfg, targets)
                for key in per_row:  # rows back in batch order (the last epoch's values win)
                    if key in stats:
                        per_row[key][rows.cpu().numpy() if torch.is_tensor(rows) else rows] = stats.pop(key).detach().cpu().numpy()
                acc = sums[group.name]
                for key, value in stats.items():
                    value = value.detach()
                    acc[key] = acc[key] + value if key in acc else value
                group_steps[group.name] += 1
            self.sgd_steps[pid] += 1
            steps += 1
        module.eval()
        out: dict = {}
        if algo.finish is not None:  # per-row columns of the updated network (HAPPO's new log-probs)
            out.update({k: v.detach().cpu().numpy() for k, v in algo.finish(module, _whole_batch(tensors, tables), cfg).items()})
        for group in groups:  # one group: today's stat names; several: '<group>/<stat>'
            prefix = "" if len(self.groups[pid]) == 1 else group.name + "/"
            ran = group_steps[group.name]
            out.update({prefix + key: float(value) / ran for key, value in sums[group.name].items()})
        out["num_sgd_steps"] = steps
        out.update(compiled_share(groups))  # learners.compile_loss: whether the compiled losses ran (1.0) or eager
        out["agent_steps_trained"] = n
        out.update(per_row)
        return out

    def _row_minibatches(self, tensors: dict, n: int, plan):
        """(rows, minibatch) of each SGD step of a memoryless module: rows shuffled once per epoch (`rows`: a slice
        or the row indices as a tensor, turned into NumPy only where per-row stats need them)."""
        size = min(plan.minibatch_size or n, n)
        for _ in range(plan.num_epochs):
            if plan.num_epochs == 1 and size == n:
                yield slice(0, n), tensors  # one step on the whole batch: nothing to shuffle
                continue
            # Shuffle once per epoch; minibatches are then contiguous views, not gathers.
            order = torch.from_numpy(self.rng.permutation(n))
            on_device = order.to(self.device) if self.device.type != "cpu" else order
            shuffled = {k: t[on_device] for k, t in tensors.items()}
            for start in range(0, n, size):
                yield order[start : start + size], {k: t[start : start + size] for k, t in shuffled.items()}

    def _step_group(self, pid: str, group: ParamGroup, module, minibatch: dict, cfg, targets: dict) -> dict:
        """One SGD step of one group: its loss, zero_grad, backward, clip, Adam step; returns the loss stats."""
        optimizer = self.optimizers[pid][group.name]
        loss, stats = self._group_loss(pid, group, module, minibatch, cfg, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if group.grad_clip is not None:
            stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(self._clipped[pid][group.name], group.grad_clip)
        optimizer.step()
        return stats

    def _group_loss(self, pid: str, group: ParamGroup, module, minibatch: dict, cfg, targets: dict):
        """The group's loss term on a minibatch (data-parallel learners compute it on their slice)."""
        return group.loss(module, minibatch, cfg, targets)

    def update_target(self, tau: float = 1.0, policies: list[str] | None = None) -> list[str]:
        """copy <- tau * online + (1 - tau) * copy, for every target copy of every trained policy (or those named).

        Returns the ids of the policies whose copies moved.
        """
        chosen = [pid for pid in self.targets if policies is None or pid in policies]
        with torch.no_grad():
            for pid in chosen:
                for name, target in self.targets[pid].items():
                    online = self._target_sources[pid][name](self.module[pid]).state_dict()
                    for key, value in target.state_dict().items():
                        if tau >= 1.0 or not value.is_floating_point():
                            value.copy_(online[key])
                        else:
                            value.lerp_(online[key], tau)
        return chosen

    # -- weights --------------------------------------------------------------
    def get_weights(self, on_device: bool = False) -> dict:  # on_device: tensor copies, for a runner in this process
        modules = self.module.get_tensors() if on_device else self.module.get_state()
        return {"version": self.version, "modules": modules, "connectors": self.connectors.get_central()}

    def set_weights(self, weights: dict) -> None:
        self.module.set_state(weights["modules"])
        self.connectors.set_central(weights.get("connectors", {}))
        self.version = weights["version"]

    def get_version(self) -> int:
        return self.version

    def get_threads(self) -> tuple[int, str]:  # (torch threads of the updates, why)
        return self.threads

    def get_target_state(self) -> dict:
        """{pid: {copy name: {tensor name: array}}}."""
        return {pid: {name: network_state(t) for name, t in copies.items()} for pid, copies in self.targets.items()}

    def set_target_state(self, state: dict) -> None:
        for pid, copies in state.items():
            if not all(isinstance(v, dict) for v in copies.values()):
                # Written before target copies had names: the policy's one whole-module copy.
                (name,) = self.targets[pid]
                copies = {name: copies}
            for name, target_state in copies.items():
                load_network_state(_named(self.targets[pid], name, f"target copy of policy '{pid}'"), target_state)

    def get_optimizer_state(self) -> dict:
        """{pid: {group name: the optimiser's state_dict}}, trainable groups only."""
        return {pid: {name: opt.state_dict() for name, opt in opts.items()} for pid, opts in self.optimizers.items()}

    def set_optimizer_state(self, state: dict) -> None:
        """Adam's moments and step counts from a checkpoint; lr, eps and betas stay this config's.

        load_state_dict would also bring back the saved hyperparameters, and then
        `--resume RUN_DIR training.lr=X` would silently train with the old rate.
        """
        for pid, groups in state.items():
            if "param_groups" in groups:  # written before parameter groups: one optimiser per policy
                groups = {DEFAULT_GROUP: groups}
            specs = {g.name: g for g in self.groups[pid]}
            for name, opt_state in groups.items():
                optimizer, spec = _named(self.optimizers[pid], name, f"parameter group of policy '{pid}'"), specs[name]
                optimizer.load_state_dict(opt_state)
                for group in optimizer.param_groups:
                    group["lr"], group["eps"], group["betas"] = spec.lr, spec.eps, tuple(spec.betas)

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
            "sgd_steps": dict(self.sgd_steps),
            "connectors": self.connectors.get_state(),
            "rng": {
                "numpy": self.rng.bit_generator.state,
                "torch": torch.get_rng_state(),
                "python": random.getstate(),
            },
        }

    def set_state(self, state: dict) -> None:
        self.set_weights(state["weights"])
        self.set_optimizer_state(state["optimizers"])
        self.connectors.set_state(state.get("connectors", {}))
        targets = state.get("targets")
        if targets:
            self.set_target_state({pid: t for pid, t in targets.items() if pid in self.targets})
        elif self.targets:  # a checkpoint without target networks: start them from the restored weights
            self.update_target(1.0)
        for pid, count in state.get("sgd_steps", {}).items():  # written before schedules: they restart at 0
            if pid in self.sgd_steps:
                self.sgd_steps[pid] = int(count)
        rng = state.get("rng")
        if rng:
            self.rng.bit_generator.state = rng["numpy"]
            torch.set_rng_state(rng["torch"])
            random.setstate(rng["python"])

    def ping(self) -> str:
        return "ok"
