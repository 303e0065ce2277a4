"""The off-policy operators: store to replay, replay, update priorities, update target networks.

Each trained policy has its own buffer (`ctx.replay_buffers[pid]`); a
policy's transitions never enter another policy's buffer.
"""

from __future__ import annotations

import numpy as np

from marl.data import MultiAgentBatch
from marl.data import sample_batch as sb
from marl.data.chunks import state_names as chunk_state_names
from marl.data.records import BATCH, RESULTS, SKIP, STORED, SampledBatch, Stored
from marl.execution import LocalIterator
from marl.execution import metrics as m
from marl.replay import nstep_transitions
from marl.replay.joint import alive_before_padding, joint_transitions
from marl.workflow.protocol import Operator, policy_list
from marl.modules.recurrent import sequence_chunking
from marl.replay.sequences import agent_sequences
from marl.replay.sequences import joint_sequences


class StoreToReplay(Operator):
    """Turns each policy's rows into n-step transitions and adds them to that policy's buffer.

    joint=True stores one row per env step of each policy's agent group
    instead (all its agents' obs and actions, the team reward; VDN/QMIX),
    with the group's agents from `config.plan_for(policy_id).group_agent_indices`.
    policies: only these policies' rows are stored (a per-policy branch);
    null: every policy with a buffer.

    Emits the number of transitions stored per policy (`Stored`).
    """

    op_name, consumes, produces, handles_skip = "store_to_replay", (BATCH,), STORED, True

    def __init__(self, n_step: int = 1, gamma: float = 0.99, joint: bool = False, policies: list | None = None):
        self.policies = policy_list("store_to_replay", policies)
        if int(n_step) < 1:
            raise ValueError(f"store_to_replay.n_step must be >= 1, got {n_step}")
        if not 0 <= float(gamma) <= 1:
            raise ValueError(f"store_to_replay.gamma must be in [0, 1], got {gamma}")
        self.n_step, self.gamma, self.joint = int(n_step), float(gamma), bool(joint)

    def _transitions(self, ctx, pid, policy_batch):
        names = chunk_state_names(policy_batch)
        if not self.joint:
            if names:  # a recurrent Q network: chunks of each agent's steps with their starting states

                max_seq_len, burn_in = sequence_chunking(ctx.config, pid)
                return agent_sequences(policy_batch, max_seq_len, names, burn_in=burn_in)
            # the legal actions at obs travel too (masked envs only): discrete SAC's actor masks its policy with them
            return nstep_transitions(policy_batch, self.n_step, self.gamma, keep=(sb.AGENT_INDEX, sb.ACTION_MASK))
        groups = ctx.config.plan_for(pid).group_agent_indices
        if groups is None:
            raise ValueError(f"store_to_replay(joint=true) needs agent groups: algorithm {ctx.config.algo_name} defines none (VDN and QMIX do)")
        if names:  # recurrent agents: chunks of joint steps with their starting states (marl.replay.sequences)

            max_seq_len, burn_in = sequence_chunking(ctx.config, pid)
            return joint_sequences(policy_batch, groups, max_seq_len, names, burn_in=burn_in)
        return joint_transitions(policy_batch, groups, self.n_step, self.gamma)

    def build(self, ctx, inputs):
        (upstream,) = inputs
        metrics, buffers = ctx.metrics, ctx.replay_buffers
        if not buffers:
            raise ValueError("store_to_replay needs replay buffers: this algorithm's config defines none")
        timer = metrics.timers["store"]

        def store(record):
            if record is SKIP:
                return SKIP
            stored = {}
            with timer.timing():
                for pid, policy_batch in record.batch.policy_batches.items():
                    buffer = buffers.get(pid)
                    if buffer is None or not len(policy_batch) or (self.policies is not None and pid not in self.policies):
                        continue  # a policy that is not trained keeps no buffer
                    # the buffers hold NumPy: a batched runner's tensors are read to the host here, once
                    transitions = self._transitions(ctx, pid, policy_batch.to_numpy())
                    if self.joint:  # (a buffer from a checkpoint of before the dead-agent padding)
                        alive_before_padding(buffer, transitions)
                    buffer.add(transitions)
                    stored[pid] = len(transitions)
                    metrics.counters[f"{m.REPLAY_ADDED}/{pid}"] += len(transitions)
            return Stored(stored)

        return upstream.for_each(store)


class Replay(Operator):
    """Samples `batch_size` transitions from each policy's buffer once it holds `learning_starts`.

    Until then it emits SKIP, so the branch keeps its turn in a round-robin join
    without blocking the sampling branch. policies: only these policies'
    buffers (a per-policy branch); null: every buffer.
    """

    op_name, consumes, produces, may_skip = "replay", (), BATCH, True

    def __init__(self, batch_size: int, learning_starts: int = 1000, policies: list | None = None):
        self.policies = policy_list("replay", policies)
        if int(batch_size) < 1:
            raise ValueError(f"replay.batch_size must be >= 1, got {batch_size}")
        if int(learning_starts) < 0:
            raise ValueError(f"replay.learning_starts must be >= 0, got {learning_starts}")
        self.batch_size, self.learning_starts = int(batch_size), int(learning_starts)

    def build(self, ctx, inputs):
        metrics, buffers = ctx.metrics, ctx.replay_buffers
        if not buffers:
            raise ValueError("replay needs replay buffers: this algorithm's config defines none")
        timer = metrics.timers["replay"]
        need = max(self.learning_starts, 1)
        if self.policies is not None:
            missing = [p for p in self.policies if p not in buffers]
            if missing:
                raise ValueError(f"replay.policies names {missing}, which keep no replay buffer; buffers: {sorted(buffers)}")
            buffers = {p: buffers[p] for p in self.policies}

        def gen():
            while True:
                with timer.timing():
                    batches, indexes = {}, {}
                    for pid, buffer in buffers.items():
                        if len(buffer) >= need:
                            batches[pid], indexes[pid] = buffer.sample(self.batch_size)
                if not batches:
                    yield SKIP
                    continue
                # Trained env steps of a replayed batch: its rows per policy (env steps are not recoverable).
                yield SampledBatch(MultiAgentBatch(batches, self.batch_size), replay_indexes=indexes)

        return LocalIterator(gen, metrics, "replay")


class UpdatePriorities(Operator):
    """Prioritised replay: sets each replayed row's priority from its TD error (a no-op for uniform buffers)."""

    op_name, consumes, produces, handles_skip = "update_priorities", (RESULTS,), RESULTS, True

    def build(self, ctx, inputs):
        (upstream,) = inputs
        buffers = ctx.replay_buffers

        def update(results):
            if results is SKIP:
                return SKIP
            indexes = results.replay_indexes
            for pid, rows in results.per_row.items():
                td = rows.get("td_error")
                if td is not None and pid in indexes:
                    buffers[pid].update_priorities(indexes[pid], np.asarray(td))
            return results

        return upstream.for_each(update)


class UpdateTarget(Operator):
    """Copies online weights into the target networks every `every_env_steps` sampled env steps.

    tau < 1 makes it a soft (Polyak) update: target <- tau * online + (1 - tau) * target.
    policies: only these policies' targets (a per-policy branch); null: all.
    """

    op_name, consumes, produces, handles_skip = "update_target", (RESULTS,), RESULTS, True

    def __init__(self, every_env_steps: int = 500, tau: float = 1.0, policies: list | None = None):
        self.policies = policy_list("update_target", policies)
        if int(every_env_steps) < 1:
            raise ValueError(f"update_target.every_env_steps must be >= 1, got {every_env_steps}")
        if not 0 < float(tau) <= 1:
            raise ValueError(f"update_target.tau must be in (0, 1], got {tau}")
        self.every_env_steps, self.tau = int(every_env_steps), float(tau)
        self._last = {"env_steps": 0}

    def get_state(self) -> dict:  # env steps at the last target update
        return dict(self._last)

    def set_state(self, state: dict) -> None:
        self._last.update(env_steps=int(state["env_steps"]))

    def build(self, ctx, inputs):
        (upstream,) = inputs
        counters = ctx.metrics.counters
        last = self._last = {"env_steps": 0}

        def update(results):
            if results is not SKIP and counters[m.ENV_STEPS_SAMPLED] - last["env_steps"] >= self.every_env_steps:
                last["env_steps"] = counters[m.ENV_STEPS_SAMPLED]
                for pid in ctx.learners.update_target(self.tau, self.policies):
                    counters[f"{m.TARGET_UPDATES}/{pid}"] += 1
                counters[m.TARGET_UPDATES] += 1
            return results

        return upstream.for_each(update)

