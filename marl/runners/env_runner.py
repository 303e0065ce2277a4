"""EnvRunner: K env copies stepped in lockstep, one batched forward pass per policy per step.

The same class runs in-process or as a Ray actor. Each step it groups the
acting agents of all K envs by policy, runs ONE forward pass per policy on
the inputs its module declares (`module_inputs`), writes the rows into
preallocated per-policy columns -- only those the policy's algorithm asks
for (the policy's plan: `config.plan_for(pid).columns`) -- and steps every env.
A fragment of `rollout_fragment_length` steps per env comes back as a
`MultiAgentBatch` plus the metrics of the episodes that finished.

Randomness and resumption. A runner draws from its own generators only: a
torch generator for action sampling and, per env copy, a NumPy generator
that picks the seed of every env reset. All derive from
(`debugging.seed`, worker index, incarnation, env copy) through NumPy's
SeedSequence, so each runner and env copy has its own stream and an
in-process run is reproducible. An env copy's first reset is seeded; later
resets record the state of the env's own generator (`np_random_source()`)
before resetting without a seed, or, for an env without one, draw a fresh
reset seed. So `get_state()` captures an in-progress episode as where it
started (seed or generator state) plus the actions taken since, and
`set_state()` replays them. That restores the env exactly for any env whose
randomness comes from that seed or generator (a digest of the observations
checks it), without pickling the env. The checkpoint methods (`get_state`, `set_state`) live in
`marl.runners.runner_state`, the step loop in `marl.runners.lockstep`.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from marl.connectors import PolicyConnectors
from marl.data import Episode, MultiAgentBatch
from marl.data import sample_batch as sb
from marl.data.columns import check_columns, columns_for
from marl.data.records import SampledBatch  # what sample() returns: the rows and where they came from
from marl.envs import EnvChecker, EnvStepError, make_env, register_env
from marl.modules.recurrent import sequence_chunking  # where stored states start training sequences
from marl.policies import MappingError, PolicyMapping, resolve_policies
from marl.runners.actor_basics import ActorBasics
from marl.runners.collector import PolicyCollector
from marl.runners.env_checks import BoundaryCheck
from marl.runners.fragments import fragment_length
from marl.runners.global_state import GlobalState, probe_global_state
from marl.runners.lockstep import LockstepSteps
from marl.runners.module_inputs import AgentStates, ModuleInputs
from marl.runners.runner_state import RunnerState

log = logging.getLogger(__name__)


class EnvRunner(LockstepSteps, RunnerState, ActorBasics):  # the step loop; checkpoint state; ping, getpid, node_id
    def __init__(self, config, worker_index: int = 0, incarnation: int = 0):
        """`incarnation` counts restarts of this runner slot: a replacement gets fresh seeds, not the dead one's."""
        runner_seq, *env_seqs = self._setup(config, worker_index, incarnation, 1 + config.env_runners_cfg.num_envs_per_env_runner)
        config = self.config
        env_cfg, run_cfg = config.environment_cfg, config.env_runners_cfg
        self.num_envs = run_cfg.num_envs_per_env_runner
        torch_seed = self._torch_seed(runner_seq)
        self.torch_rng = torch.Generator().manual_seed(torch_seed)  # action sampling: never the global generator
        self._reset_rngs = [np.random.default_rng(s) for s in env_seqs]  # one stream of reset seeds per env copy
        if config.env_creator is not None:  # a name registered in the driver process
            register_env(env_cfg.env, config.env_creator)
        self.envs = self._make_envs()
        env0 = self.envs[0]
        self.possible_agents = list(env0.possible_agents)
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        self.fragment_length = fragment_length(config, len(self.possible_agents))

        self.mapping: PolicyMapping = config.policy_mapping()
        self.specs, agents_of = resolve_policies(env0, config.policy_specs(), self.mapping)
        self.policy_ids = list(self.specs)
        self.module = self._build_modules(torch_seed).eval()
        # Each policy's env->module and module->env pipelines (state per env copy and agent).
        self.connectors = {pid: PolicyConnectors(config, pid, s, self.num_envs, len(self.possible_agents)) for pid, s in self.specs.items()}
        # Only what each policy's algorithm asks for is computed and recorded (DQN: no values, no log-probs).
        self.columns = {pid: check_columns(config.runner_columns(pid), pid) for pid in self.specs}
        self.module_inputs = {pid: ModuleInputs(self.module[pid], self.connectors[pid], pid) for pid in self.specs}
        # Stateful modules: one state per (env copy, agent); stateless policies have no entry (and no cost).
        self.agent_states = {
            pid: AgentStates(built.initial_state, self.num_envs, pid)
            for pid, built in self.module_inputs.items() if built.stateful
        }
        # Stateless modules that mirror their acting pass in NumPy (`RLModule.numpy_actor`) act without torch calls.
        self.numpy_actors = {}
        for pid in self.specs if run_cfg.numpy_acting else ():
            actor = None if pid in self.agent_states else self.module[pid].numpy_actor()
            if actor is not None:
                self.numpy_actors[pid] = actor
        # Centralised critics (MAPPO) read the global state at every step; other algorithms skip it.
        state_spec = None
        wanted = any(sb.STATE in c for c in self.columns.values()) or any(b.wants_state for b in self.module_inputs.values())
        if wanted:
            state_spec = config.global_state_spec() or probe_global_state(env0)
        self.global_state = GlobalState(env0, state_spec) if state_spec else None
        self.collectors = {}
        for pid, spec in self.specs.items():
            conn = self.connectors[pid]
            mask_dim = self.module[pid].action_dim if conn.masked else None
            capacity = self.num_envs * self.fragment_length * max(1, len(agents_of[pid]))
            specs = columns_for(conn.obs_shape, conn.obs_dtype, conn.action_shape, conn.action_dtype, self.columns[pid],
                                mask_dim, state_dim=state_spec["dim"] if state_spec else None,
                                module_state=self.module_inputs[pid].initial_state)
            self.collectors[pid] = PolicyCollector(specs, capacity, chunking=sequence_chunking(config, pid))

        self.weights_version = 0
        self._steps_sampled = 0
        self._next_episode_id = (worker_index << 40) + 1
        self._obs: list[dict] = [{} for _ in range(self.num_envs)]
        self._episodes: list[Episode | None] = [None] * self.num_envs
        # pending[k][agent] = (policy id, row) of the agent's last action still collecting reward
        self._pending: list[dict] = [{} for _ in range(self.num_envs)]
        self._finished: list[dict] = []
        self._started = False
        self._active = list(range(self.num_envs))  # env copies being stepped (evaluation retires some)
        # What replays an env copy's in-progress episode: how it started ({"seed": s} or {"rng": generator
        # state}) and the actions since.
        self._episode_starts: list[dict | None] = [None] * self.num_envs
        self._replay: list[list[dict]] = [[] for _ in range(self.num_envs)]
        self._boundary = BoundaryCheck(env0)  # unknown agents and misshapen observations: always, cheaply
        self._checkers = None
        if config.debugging_cfg.validate_env:
            self._checkers = [EnvChecker(env, self._label(k)) for k, env in enumerate(self.envs)]
        # batch_mode=complete_episodes: while a fragment finishes its open episodes, an env whose episode
        # ended is parked (not reset, not stepped) until the others are done.
        self._complete_episodes = run_cfg.batch_mode == "complete_episodes"
        self._finishing = False
        self._parked = [False] * self.num_envs

    def _make_envs(self) -> list:  # the K env copies (a vectorised runner overrides it: vector_env_runner.py)
        env_cfg = self.config.environment_cfg
        return [make_env(env_cfg.env, dict(env_cfg.env_config), env_cfg.wrappers) for _ in range(self.num_envs)]

    def _label(self, k: int) -> str:
        return f"env '{self.config.environment_cfg.env}' (runner {self.worker_index}, env copy {k})"

    # -- episodes -----------------------------------------------------------
    def _reset_env(self, k: int) -> None:
        env = self.envs[k]
        # Reading a generator's state costs ~2 us; seeding one anew at every reset costs ~25 us.
        source = env.np_random_source() if self._episode_starts[k] is not None else None
        if source is None:
            seed = int(self._reset_rngs[k].integers(2**31 - 1))
            start = {"seed": seed}
        else:
            seed = None
            start = {"rng": source.bit_generator.state if isinstance(source, np.random.Generator) else source.get_state()}
        try:
            obs, _ = env.reset(seed=seed)
        except Exception as err:
            raise EnvStepError(f"{self._label(k)} raised in reset(seed={seed}): {type(err).__name__}: {err}") from err
        if self._checkers is not None:
            self._checkers[k].check_reset(obs)
        self._boundary.reset(obs, lambda: self._label(k))
        self._obs[k] = obs
        self._episode_starts[k] = start
        self._replay[k] = []
        self._episodes[k] = Episode(id=self._next_episode_id, env_index=k)
        self._next_episode_id += 1
        self._pending[k] = {}
        for states in self.agent_states.values():  # every agent's next step starts its episode
            states.reset(k)

    def _bind(self, episode: Episode, agent: str) -> str:
        pid = self.mapping(agent, episode)
        if pid not in self.specs:
            raise MappingError(f"policy_mapping sent agent '{agent}' to unknown policy '{pid}'; known: {self.policy_ids}")
        episode.bind(agent, pid)
        return pid

    def _start(self) -> None:
        for k in range(self.num_envs):
            self._reset_env(k)
        self._started = True

    # -- one lockstep step over all envs: _act and _step_envs (marl/runners/lockstep.py) --
    def _finish_episodes(self, explore: bool) -> int:
        """Steps the envs until every open episode has ended, then resets them all; returns env steps taken."""
        env_steps = 0
        self._finishing = True
        try:
            while not all(self._parked):
                env_steps += self._step_envs(self._act(collect=True, explore=explore), collect=True)
        finally:
            self._finishing = False
        for k in range(self.num_envs):
            self._parked[k] = False
            self._reset_env(k)
        return env_steps

    def _piece_end(self, ends: dict, pid: str, row: int, k: int, agent: str, obs, state) -> None:
        """Notes for `_bootstrap` that row `row` of policy `pid` (agent `agent` of env copy k) ends a piece without
        termination, reaching `obs` (None: not acting then) and global state `state`, with the module state the agent
        carries now (None: stateless policy; read before a reset)."""
        states = self.agent_states.get(pid)
        carried = None if states is None else states.by_env[k][agent]
        for column, value in zip(ends.setdefault(pid, ([], [], [], [])), (row, obs, state, carried)):
            column.append(value)

    def _bootstrap(self, rows_by_policy: dict[str, tuple[list, list, list, list]]) -> None:
        """Closes trajectory pieces that end without termination, as each policy's columns ask:
        the observation reached (`next_obs`) and V(s') (`bootstrap_value`, one pass per policy).

        Each entry is (rows, the observation reached, the global state reached, the
        agent's carried module state); a row with no observation reached (not acting
        then, e.g. turn-based) bootstraps from its own value.
        """
        for pid, (rows, raw_obs, next_states, carried) in rows_by_policy.items():
            collector = self.collectors[pid]
            wants_value = collector.bootstrap_value is not None
            if not wants_value and collector.next_obs is None:
                continue
            fallback = [r for r, o in zip(rows, raw_obs) if o is None]
            if fallback:
                collector.end_without_next(fallback)
            reached = [j for j, o in enumerate(raw_obs) if o is not None]
            if not reached:
                continue
            rows = [rows[j] for j in reached]
            raw_obs = [raw_obs[j] for j in reached]
            build = self.module_inputs[pid]
            ctx = self.connectors[pid].peek_rows(collector.cols, rows)
            if not wants_value:  # transitions only (DQN family): the observation, no forward pass
                obs, mask = build.observe(raw_obs, ctx)
            else:
                global_state = np.stack([next_states[j] for j in reached]) if build.wants_state else None
                state_in = episode_start = None
                if build.stateful:
                    state_in = {name: np.stack([carried[j][name] for j in reached]) for name in build.initial_state}
                    episode_start = np.zeros(len(rows), dtype=np.bool_)
                agent_idx = collector.cols[sb.AGENT_INDEX][rows]
                numpy_actor = self.numpy_actors.get(pid)
                if numpy_actor is not None:  # (acting recorded values already: the module has a value pass)
                    arrays, obs, mask = build.arrays(raw_obs, ctx, agent_idx, global_state)
                    collector.bootstrap_value[rows] = numpy_actor.values(arrays)
                else:
                    inputs, obs, mask = build(raw_obs, ctx, agent_idx, global_state, state_in, episode_start)
                    collector.bootstrap_value[rows] = self.module[pid].forward_exploration(inputs)["vf_preds"].numpy()
            if collector.next_obs is not None:
                collector.next_obs[rows] = obs
            if collector.next_action_mask is not None:
                collector.next_action_mask[rows] = mask
            collector.set_next_states(rows, [next_states[j] for j in reached])  # no-op unless next_state is asked for

    # -- public API ---------------------------------------------------------
    def sample(self, explore: bool = True) -> SampledBatch:
        """`rollout_fragment_length` lockstep steps of all envs: their rows, plus the finished episodes'
        metrics, the weights version the data was produced with and the observation-filter deltas."""
        if not self._started:
            self._start()
        self._set_exploration_step()  # (the whole run's env steps: each runner estimates them from its own)
        env_steps = 0
        for _ in range(self.fragment_length):
            env_steps += self._step_envs(self._act(collect=True, explore=explore), collect=True)
        if self._complete_episodes:
            env_steps += self._finish_episodes(explore)
        # Cut the fragment: agents still mid-episode bootstrap from the observation they act on next.
        cut: dict[str, tuple[list, list, list, list]] = {}
        for k in range(self.num_envs):
            obs = self._obs[k]
            state = self.global_state(self.envs[k], obs) if self.global_state is not None and self._pending[k] else None
            for agent, (pid, row) in self._pending[k].items():  # (obs None: not acting now, e.g. turn-based)
                self._piece_end(cut, pid, row, k, agent, obs.get(agent), state)
            self._pending[k] = {}
        self._bootstrap(cut)
        self._steps_sampled += env_steps
        batches = {pid: c.build() for pid, c in self.collectors.items() if c.n > 0}
        deltas = {pid: d for pid, d in ((pid, c.pop_deltas()) for pid, c in self.connectors.items()) if d}
        finished, self._finished = self._finished, []
        return SampledBatch(
            MultiAgentBatch(batches, env_steps), episodes=finished, weights_versions=[self.weights_version],
            runners=[self.worker_index], connector_deltas=[deltas] if deltas else [],
        )

    # -- evaluation (ActorBasics.run_evaluation): every evaluation starts new episodes under the current weights --
    def _start_evaluation(self) -> int:
        for k in range(self.num_envs):
            self._reset_env(k)
        self._started = True
        self._finished = []
        return self._episodes[0].id

    def _evaluation_steps(self, explore: bool, last_id: int | None, steps_left: int | None) -> tuple[int, list[dict]]:
        """One lockstep step; an env copy whose episode is not among the evaluated ones (id >= `last_id`) retires,
        so short episodes are not favoured."""
        if last_id is not None:
            self._active = [k for k in range(self.num_envs) if self._episodes[k].id < last_id]
        steps = self._step_envs(self._act(collect=False, explore=explore), collect=False)
        finished, self._finished = self._finished, []
        return steps, finished

    def _end_evaluation(self) -> None:
        self._active = list(range(self.num_envs))
        self._finished = []

    # -- checkpoints: get_state and set_state (marl/runners/runner_state.py) --
    def set_mapping_state(self, state) -> None:
        """The policy mapping's state (a league's matchmaking table), sent by the driver between samples."""
        self.mapping.set_state(state)

    def _load_weights(self, weights: dict) -> None:
        for pid, central in weights.get("connectors", {}).items():  # observation-filter state
            self.connectors[pid].set_central(central)

    def stop(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass
