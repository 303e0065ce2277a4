"""EnvRunner: K env copies stepped in lockstep, one batched forward pass per policy per step.

The same class runs in-process or as a Ray actor. Each step it groups the
acting agents of all K envs by policy, runs ONE forward pass per policy,
writes the rows into preallocated per-policy columns, and steps every env.
A fragment of `rollout_fragment_length` steps per env comes back as a
`MultiAgentBatch` plus the metrics of the episodes that finished.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from marl.connectors import ActionAdapter, ObservationPreprocessor
from marl.data import Episode, MultiAgentBatch
from marl.data import sample_batch as sb
from marl.envs import EnvError, make_env, register_env
from marl.modules import MultiRLModule, build_module
from marl.policies import PolicyMapping, resolve_policies
from marl.runners.collector import PolicyCollector
from marl.runners.global_state import GlobalState

ALL = "__all__"


class EnvRunner:
    def __init__(self, config, worker_index: int = 0):
        torch.set_num_threads(1)  # small forward passes on few cores: threads only add latency
        self.config = config
        self.worker_index = worker_index
        env_cfg, run_cfg = config.environment_cfg, config.env_runners_cfg
        seed = config.debugging_cfg.seed
        self._base_seed = None if seed is None else int(seed) + 10_007 * worker_index  # derived per runner
        if self._base_seed is not None:
            torch.manual_seed(self._base_seed)  # before the modules exist: their init is seeded too
        self.num_envs = run_cfg.num_envs_per_env_runner
        self.fragment_length = run_cfg.rollout_fragment_length
        if getattr(config, "env_creator", None) is not None:  # a name registered in the driver process
            register_env(env_cfg.env, config.env_creator)
        self.envs = [make_env(env_cfg.env, dict(env_cfg.env_config)) for _ in range(self.num_envs)]
        env0 = self.envs[0]
        self.possible_agents = list(env0.possible_agents)
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}

        self.mapping: PolicyMapping = config.policy_mapping()
        self.specs, agents_of = resolve_policies(env0, config.policy_specs(), self.mapping)
        self.policy_ids = list(self.specs)
        self.module = MultiRLModule(
            {pid: build_module(config.module_class_for(s), s.observation_space, s.action_space, config.model_for(pid)) for pid, s in self.specs.items()}
        )
        self.module.eval()
        normalize = run_cfg.observation_filter == "mean_std"
        self.preprocessors = {pid: ObservationPreprocessor(s.observation_space, normalize) for pid, s in self.specs.items()}
        self.action_adapters = {
            pid: ActionAdapter(s.action_space, env_cfg.clip_actions, env_cfg.unsquash_actions) for pid, s in self.specs.items()
        }
        # Centralised critics (MAPPO) read the global state at every step; other algorithms skip it.
        state_spec = config.global_state_spec() if getattr(config, "needs_global_state", False) else None
        self.global_state = GlobalState(env0, state_spec) if state_spec else None
        self.collectors = {}
        for pid, spec in self.specs.items():
            pre, act = self.preprocessors[pid], self.action_adapters[pid]
            mask_dim = self.module[pid].action_dim if pre.masked else None
            capacity = self.num_envs * self.fragment_length * max(1, len(agents_of[pid]))
            self.collectors[pid] = PolicyCollector(
                pre.dim, act.shape, act.dtype, mask_dim, capacity, next_obs=getattr(config, "needs_next_obs", False),
                state_dim=state_spec["dim"] if state_spec else None,
            )

        self.weights_version = 0
        self._steps_sampled = 0
        self._episode_ids = itertools.count((worker_index << 40) + 1)
        self._obs: list[dict] = [{} for _ in range(self.num_envs)]
        self._episodes: list[Episode | None] = [None] * self.num_envs
        # pending[k][agent] = (policy id, row) of the agent's last action still collecting reward
        self._pending: list[dict] = [{} for _ in range(self.num_envs)]
        self._finished: list[dict] = []
        self._started = False

    # -- episodes -----------------------------------------------------------
    def _reset_env(self, k: int, first: bool) -> None:
        seed = None
        if first and self._base_seed is not None:
            seed = self._base_seed + k
        obs, _ = self.envs[k].reset(seed=seed)
        self._obs[k] = obs
        self._episodes[k] = Episode(id=next(self._episode_ids), env_index=k)
        self._pending[k] = {}

    def _bind(self, episode: Episode, agent: str) -> str:
        pid = self.mapping(agent, episode)
        if pid not in self.specs:
            raise ValueError(f"policy_mapping sent agent '{agent}' to unknown policy '{pid}'; known: {self.policy_ids}")
        episode.bind(agent, pid)
        return pid

    def _start(self) -> None:
        for k in range(self.num_envs):
            self._reset_env(k, first=True)
        self._started = True

    # -- one lockstep step over all envs ------------------------------------
    def _act(self, collect: bool, explore: bool) -> list[dict]:
        """One forward pass per policy over the acting agents of all envs; returns per-env action dicts."""
        # pid -> (env indices, agent ids, raw obs, episode ids, env steps, agent indices)
        groups: dict[str, tuple[list, list, list, list, list, list]] = {}
        agent_index = self.agent_index
        for k in range(self.num_envs):
            episode = self._episodes[k]
            binding, eps_id, t = episode.policy_of, episode.id, episode.t
            for agent, ob in self._obs[k].items():
                pid = binding.get(agent) or self._bind(episode, agent)
                group = groups.get(pid)
                if group is None:
                    group = groups[pid] = ([], [], [], [], [], [])
                group[0].append(k)
                group[1].append(agent)
                group[2].append(ob)
                group[3].append(eps_id)
                group[4].append(t)
                group[5].append(agent_index[agent])
                episode.agent_steps[agent].append(t)

        actions: list[dict] = [{} for _ in range(self.num_envs)]
        states = None
        if self.global_state is not None:  # one state per env copy, shared by its agents' rows
            states = [self.global_state(self.envs[k], self._obs[k]) for k in range(self.num_envs)]
        for pid, (envs_idx, agents, raw_obs, eps_ids, steps, agent_idx) in groups.items():
            obs, mask = self.preprocessors[pid](raw_obs, update_filter=collect)
            module = self.module[pid]
            inputs = {"obs": torch.from_numpy(obs)}
            if mask is not None:
                inputs["action_mask"] = torch.from_numpy(mask)
            state = None
            if states is not None:
                state = np.stack([states[k] for k in envs_idx])
                inputs["state"] = torch.from_numpy(state)
                inputs["agent_index"] = torch.as_tensor(agent_idx, dtype=torch.int64)
            if explore:
                out = module.forward_exploration(inputs)
                dist = module.action_dist(out["action_dist_inputs"])
                act_t = dist.sample()
            else:
                out = module.forward_inference(inputs)
                dist = module.action_dist(out["action_dist_inputs"])
                act_t = dist.deterministic_sample()
            act = act_t.numpy()
            env_actions = self.action_adapters[pid](act)
            if collect:
                with torch.inference_mode():
                    logp = dist.logp(act_t).numpy()
                vf = out["vf_preds"].numpy()
                row = self.collectors[pid].add_block(obs, act, logp, vf, mask, eps_ids, agent_idx, envs_idx, steps, state)
                for k, agent in zip(envs_idx, agents):
                    self._pending[k][agent] = (pid, row)
                    row += 1
            for j, (k, agent) in enumerate(zip(envs_idx, agents)):
                actions[k][agent] = env_actions[j]
        return actions

    def _step_envs(self, actions: list[dict], collect: bool) -> int:
        """Steps every env; closes finished agents' rows; resets finished envs. Returns env steps taken."""
        truncated_rows: dict[str, tuple[list, list, list]] = {}  # pid -> (rows, final obs, next states) needing V(s')
        collectors = self.collectors
        for k, env in enumerate(self.envs):
            try:
                obs, rewards, terminateds, truncateds, _ = env.step(actions[k])
            except Exception as err:  # name where it happened; the original error stays attached
                episode = self._episodes[k]
                raise EnvError(
                    f"env '{self.config.environment_cfg.env}' (runner {self.worker_index}, copy {k}) raised at "
                    f"episode step {episode.t} with actions {actions[k]}: {type(err).__name__}: {err}"
                ) from err
            episode = self._episodes[k]
            episode.t += 1
            pending = self._pending[k]
            returns = episode.agent_returns
            for agent, r in rewards.items():
                r = float(r)
                returns[agent] = returns.get(agent, 0.0) + r
                slot = pending.get(agent)
                if slot is not None and collect:
                    collectors[slot[0]].rewards[slot[1]] += r
            all_done = terminateds.get(ALL, False) or truncateds.get(ALL, False)
            ended = [a for a, d in terminateds.items() if d and a != ALL]
            ended_trunc = [a for a, d in truncateds.items() if d and a != ALL]
            if ended or ended_trunc or all_done:
                # The state reached, read before the env resets: a centralised critic bootstraps from it.
                next_state = self.global_state(env, obs) if ended_trunc and self.global_state is not None else None
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
                        rows = truncated_rows.setdefault(slot[0], ([], [], []))
                        rows[0].append(slot[1])
                        rows[1].append(final_obs)
                        rows[2].append(next_state)
                if all_done:
                    # Agents the env ended without a flag: treat as truncated, bootstrap from their own value.
                    for agent, (pid, row) in pending.items():
                        if collect:
                            collectors[pid].truncateds[row] = True
                            collectors[pid].bootstrap_value[row] = collectors[pid].vf_preds[row]
                            if collectors[pid].next_obs is not None:
                                collectors[pid].next_obs[row] = collectors[pid].cols[sb.OBS][row]
                    episode.done = True
                    self._finished.append(episode.metrics())
                    self._reset_env(k, first=False)
                    continue
            self._obs[k] = obs
        if truncated_rows:
            self._bootstrap(truncated_rows)
        return self.num_envs

    def _bootstrap(self, rows_by_policy: dict[str, tuple[list, list, list]]) -> None:
        """V(s') for rows whose trajectory piece ends without termination: one pass per policy.

        Each entry is (rows, the observation reached, the global state reached); a
        centralised critic values the global state, any other the observation.
        """
        for pid, (rows, raw_obs, next_states) in rows_by_policy.items():
            fallback = [r for r, o in zip(rows, raw_obs) if o is None]
            next_states = [st for st, o in zip(next_states, raw_obs) if o is not None]
            rows = [r for r, o in zip(rows, raw_obs) if o is not None]
            raw_obs = [o for o in raw_obs if o is not None]
            collector = self.collectors[pid]
            if fallback:
                collector.bootstrap_value[fallback] = collector.vf_preds[fallback]
                if collector.next_obs is not None:
                    collector.next_obs[fallback] = collector.cols[sb.OBS][fallback]
            if not rows:
                continue
            obs, mask = self.preprocessors[pid](raw_obs, update_filter=False)
            if collector.next_obs is not None:
                collector.next_obs[rows] = obs
            inputs = {"obs": torch.from_numpy(obs)}
            if mask is not None:
                inputs["action_mask"] = torch.from_numpy(mask)
            if self.global_state is not None:
                inputs["state"] = torch.from_numpy(np.stack(next_states))
                inputs["agent_index"] = torch.from_numpy(collector.cols[sb.AGENT_INDEX][rows].astype(np.int64))
            collector.bootstrap_value[rows] = self.module[pid].forward_exploration(inputs)["vf_preds"].numpy()

    # -- public API ---------------------------------------------------------
    def sample(self, explore: bool = True) -> MultiAgentBatch:
        """`rollout_fragment_length` lockstep steps of all envs, as one MultiAgentBatch.

        `info` carries the finished episodes' metrics, the weights version the
        data was produced with, and the observation-filter deltas.
        """
        if not self._started:
            self._start()
        # Exploration schedules run on the whole run's env steps; each runner estimates them from its own.
        run_steps = self._steps_sampled * max(1, self.config.env_runners_cfg.num_env_runners)
        for pid in self.policy_ids:
            self.module[pid].set_exploration_step(run_steps)
        env_steps = 0
        for _ in range(self.fragment_length):
            env_steps += self._step_envs(self._act(collect=True, explore=explore), collect=True)
        # Cut the fragment: agents still mid-episode bootstrap from the observation they act on next.
        cut: dict[str, tuple[list, list, list]] = {}
        for k in range(self.num_envs):
            obs = self._obs[k]
            state = self.global_state(self.envs[k], obs) if self.global_state is not None and self._pending[k] else None
            for agent, (pid, row) in self._pending[k].items():
                rows = cut.setdefault(pid, ([], [], []))
                rows[0].append(row)
                rows[1].append(obs.get(agent))  # None (not acting now, e.g. turn-based): own value
                rows[2].append(state)
            self._pending[k] = {}
        self._bootstrap(cut)
        self._steps_sampled += env_steps
        batches = {pid: c.build() for pid, c in self.collectors.items() if c.n > 0}
        deltas = {pid: p.filter.pop_delta() for pid, p in self.preprocessors.items() if p.filter is not None}
        finished, self._finished = self._finished, []
        info = {
            "episodes": finished,
            "weights_version": [self.weights_version],
            "runner": [self.worker_index],
            "connector_deltas": [deltas] if deltas else [],
        }
        return MultiAgentBatch(batches, env_steps, info)

    def evaluate(self, num_episodes: int, explore: bool = False) -> list[dict]:
        """Runs until `num_episodes` episodes finish (no rows kept); returns their metrics."""
        if not self._started:
            self._start()
        done: list[dict] = []
        while len(done) < num_episodes:
            self._step_envs(self._act(collect=False, explore=explore), collect=False)
            done.extend(self._finished)
            self._finished = []
        return done[:num_episodes]

    def set_weights(self, weights: dict) -> int:
        """Loads modules (and observation-filter state); skipped when the version is already loaded."""
        version = weights["version"]
        if version != self.weights_version:
            self.module.set_state(weights["modules"])
            for pid, state in weights.get("connectors", {}).items():
                filt = self.preprocessors[pid].filter
                if filt is not None:
                    filt.set_state(state)
            self.weights_version = version
        return self.weights_version

    def get_weights_version(self) -> int:
        return self.weights_version

    def get_spaces(self) -> dict:
        return {pid: (s.observation_space, s.action_space) for pid, s in self.specs.items()}

    def ping(self) -> str:
        return "ok"

    def node_id(self) -> str:
        """The Ray node this runner lives on ('local' outside Ray): shows how runners spread over a cluster."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"

    def stop(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass
