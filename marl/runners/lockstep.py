"""One lockstep step of a runner's env copies: act (one forward pass per policy), then step every env.

`EnvRunner` inherits these two methods. They run once per env step of a whole
fragment, between env steps that evict the CPU caches, so every Python call and
every torch call here costs several times what it costs in a warm loop (measured
with benchmarks/speed/sampling.py and cProfile call counts):

* the acting agents of all env copies are grouped as one tuple per row (unzipped
  once per policy), not six list appends per agent;
* a module that offers a NumPy copy of its acting pass (`RLModule.numpy_actor`, the default
  actor-critics) acts through it, with no torch call per step (`marl.modules.numpy_acting`);
* otherwise one `torch.inference_mode()` block per policy; actions, log-probs and values
  leave torch as NumPy once (`Distribution.logp_numpy` picks the log-probs
  with NumPy indexing for categoricals);
* rewards reach the collectors as one vectorised add per policy per step, not
  one NumPy scalar update per agent (float32 adds, the same numbers);
* the env boundary checks (`BoundaryCheck`) run inline as four C-level set
  comparisons per env copy; only a failing one calls the checker for its message.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.data import sample_batch as sb
from marl.envs import EnvStepError
from marl.envs.base import ALL
from marl.envs.validation import unpack_step
from marl.runners.actor_basics import no_values, torch_act
from marl.runners.global_state import state_rows


class LockstepSteps:
    """`_act` and `_step_envs` of `EnvRunner` (its attributes: envs, episodes, pending rows, collectors...)."""

    def _act(self, collect: bool, explore: bool) -> list[dict]:
        """One forward pass per policy over the acting agents of all envs; returns per-env action dicts."""
        # pid -> rows of (env index, agent id, raw obs, episode id, env step, agent index)
        groups: dict[str, list[tuple]] = {}
        agent_index = self.agent_index
        all_obs, episodes = self._obs, self._episodes
        for k in self._active:
            obs_k = all_obs[k]
            if not obs_k:  # parked (complete_episodes) or no agent acts
                continue
            episode = episodes[k]
            binding, counts, eps_id, t = episode.policy_of, episode.agent_steps, episode.id, episode.t
            for agent, ob in obs_k.items():
                pid = binding.get(agent) or self._bind(episode, agent)
                rows = groups.get(pid)
                if rows is None:
                    rows = groups[pid] = []
                rows.append((k, agent, ob, eps_id, t, agent_index[agent]))
                counts[agent] += 1  # bound agents start at 0 (Episode.bind)

        actions: list[dict] = [{} for _ in range(self.num_envs)]
        states = None
        if self.global_state is not None:  # one state per env copy, shared by its agents' rows
            states = [self.global_state(self.envs[k], all_obs[k]) for k in range(self.num_envs)]
        pending = self._pending
        for pid, rows in groups.items():
            envs_idx, agents, raw_obs, eps_ids, steps, agent_idx = zip(*rows)
            conn = self.connectors[pid]
            ctx = conn.rows(envs_idx, agent_idx, eps_ids, lambda e=envs_idx, a=agents: self._agent_returns(e, a), update_stats=collect)
            module = self.module[pid]
            state_block = global_state = None
            if states is not None:
                state_block, global_state = state_rows(states, envs_idx)  # one state per env copy, one view per row
            agent_states = self.agent_states.get(pid)
            state_in = episode_start = None
            if agent_states is not None:
                state_in, episode_start = agent_states.gather(envs_idx, agents)
            numpy_actor = self.numpy_actors.get(pid)
            frozen = pid in self.frozen_policies  # acts as a frozen member: no exploration, its own distribution sampled
            try:
                if numpy_actor is not None:
                    arrays, obs, mask = self.module_inputs[pid].arrays(raw_obs, ctx, agent_idx, global_state)
                else:
                    inputs, obs, mask = self.module_inputs[pid](raw_obs, ctx, agent_idx, global_state, state_in, episode_start)
            except (ValueError, TypeError) as err:  # name the misshapen observation, not NumPy's complaint
                raise self._boundary.shape_error(raw_obs, agents, self._label(envs_idx[0]), err) or err
            if numpy_actor is not None:  # the same pass and draws in NumPy (`marl.modules.numpy_acting`)
                # (a NumPy actor's exploration is drawing from its distribution: a frozen member draws too)
                act, logp, values = numpy_actor.act(arrays, self.torch_rng, explore or frozen)
                env_actions = conn.to_env(act, ctx)
                if collect:
                    extra = self._requested(pid, lambda: logp, values, state_block, None, None)
            else:
                with torch.inference_mode():
                    out, dist, act_t = torch_act(module, inputs, self.torch_rng, explore, frozen)
                    if agent_states is not None:  # the acting agents' states advance; the others' stay
                        agent_states.scatter(envs_idx, agents, out.get("state_out"))
                    act = act_t.numpy()
                    env_actions = conn.to_env(act, ctx)
                    if collect:
                        vf = out.get("vf_preds")
                        extra = self._requested(pid, lambda: dist.logp_numpy(act), None if vf is None else vf.numpy(),
                                                state_block, state_in, episode_start)
            if collect:
                row = self.collectors[pid].add_block(obs, act, mask, eps_ids, agent_idx, envs_idx, steps, extra)
                for k, agent, action in zip(envs_idx, agents, env_actions):
                    actions[k][agent] = action
                    pending[k][agent] = (pid, row)
                    row += 1
            else:
                for k, agent, action in zip(envs_idx, agents, env_actions):
                    actions[k][agent] = action
        return actions

    def _agent_returns(self, envs_idx, agents) -> list:
        """Each row's agent return so far in its episode (read by previous-reward connector inputs)."""
        return [self._episodes[k].agent_returns.get(a, 0.0) for k, a in zip(envs_idx, agents)]

    def _requested(self, pid: str, logp, vf: np.ndarray | None, state_block, state_in, episode_start) -> dict:
        """The optional columns of one block of rows: only those the policy's algorithm asks for (`logp`: a
        function giving the rows' log-probs, called only then; `vf`: the value predictions or None)."""
        columns = self.columns[pid]
        extra = {}
        if sb.ACTION_LOGP in columns:
            extra[sb.ACTION_LOGP] = logp()
        if sb.VF_PREDS in columns:
            if vf is None:
                raise no_values(pid, self.module[pid])
            extra[sb.VF_PREDS] = vf
        if sb.STATE in columns:
            extra[sb.STATE] = state_block
        if state_in is not None:
            for name, value in state_in.items():
                extra[sb.state_in_column(name)] = value
            extra[sb.EPISODE_START] = episode_start
        return extra

    def _step_envs(self, actions: list[dict], collect: bool) -> int:
        """Steps every env; closes finished agents' rows; resets finished envs. Returns env steps taken."""
        truncated_rows: dict[str, tuple[list, list, list, list]] = {}  # pid -> piece ends (see _bootstrap)
        rewarded: dict[str, tuple[list, list]] = {}  # pid -> (rows, rewards) of this step, added in one go
        collectors = self.collectors
        envs, replay, checkers, parked = self.envs, self._replay, self._checkers, self._parked
        boundary = self._boundary
        known, known_flags = boundary.possible.issuperset, boundary.flag_keys.issuperset
        stepped = 0
        for k in self._active:
            if parked[k]:
                continue
            stepped += 1
            act_k = actions[k]
            replay[k].append(act_k)
            try:
                result = envs[k].step(act_k)
            except Exception as err:  # name where it happened; the original error stays attached
                episode = self._episodes[k]
                raise EnvStepError(
                    f"{self._label(k)} raised at episode step {episode.t} while agents {list(act_k)} acted "
                    f"(actions {act_k}): {type(err).__name__}: {err}"
                ) from err
            try:
                obs, rewards, terminateds, truncateds, _ = result
            except (TypeError, ValueError):
                unpack_step(result, self._label(k))  # raises, naming what the env returned
                raise
            episode = self._episodes[k]
            episode.t += 1
            if checkers is not None:
                checkers[k].check_step(act_k, obs, rewards, terminateds, truncateds, episode.t)
            if not (known(obs) and known(rewards) and known_flags(terminateds) and known_flags(truncateds)):
                boundary.step(obs, rewards, terminateds, truncateds, lambda: self._label(k), episode.t)  # raises
            pending = self._pending[k]
            returns = episode.agent_returns
            for agent, r in rewards.items():
                r = float(r)
                returns[agent] = returns.get(agent, 0.0) + r
                slot = pending.get(agent)
                if slot is not None and collect:
                    block = rewarded.get(slot[0])
                    if block is None:
                        block = rewarded[slot[0]] = ([], [])
                    block[0].append(slot[1])
                    block[1].append(r)
            all_done = terminateds.get(ALL, False) or truncateds.get(ALL, False)
            if all_done or any(terminateds.values()) or any(truncateds.values()):
                ended = [a for a, d in terminateds.items() if d and a != ALL]
                ended_trunc = [a for a, d in truncateds.items() if d and a != ALL]
                # The state reached, read before the env resets: a centralised critic bootstraps from it.
                next_state = self.global_state(envs[k], obs) if ended_trunc and self.global_state is not None else None
                obs = dict(obs)
                for agent in ended:
                    slot = pending.pop(agent, None)
                    if slot is not None and collect:
                        collectors[slot[0]].terminateds[slot[1]] = True
                    obs.pop(agent, None)
                for agent in ended_trunc:
                    slot = pending.pop(agent, None)
                    final_obs = obs.pop(agent, None)
                    if slot is not None and collect:
                        collectors[slot[0]].truncateds[slot[1]] = True
                        self._piece_end(truncated_rows, *slot, k, agent, final_obs, next_state)
                if all_done:
                    # Agents the env ended without a flag: treat as truncated, bootstrap from their own value.
                    for agent, (pid, row) in pending.items():
                        if collect:
                            collectors[pid].truncateds[row] = True
                            collectors[pid].end_without_next(row)
                    episode.done = True
                    self._finished.append(episode.metrics())
                    if self._finishing:
                        parked[k], self._obs[k] = True, {}
                    else:
                        self._reset_env(k)
                    continue
            self._obs[k] = obs
        for pid, (rows, values) in rewarded.items():  # each row is rewarded once per step: no repeated index
            collectors[pid].rewards[rows] += np.asarray(values, np.float32)  # float32 adds, as one by one
        if truncated_rows:
            self._bootstrap(truncated_rows)
        return stepped
