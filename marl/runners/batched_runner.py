"""BatchedEnvRunner: the sample operator's runner for envs that step many worlds as tensors.

`EnvRunner` loops over env copies and agents in Python, which is right for a Python simulator
and far too slow for one that steps 1,024 worlds in one call (VMAS, JaxMARL). This runner keeps
everything a tensor shaped [worlds, agents, ...] (`marl.envs.batched`):

- the policy mapping is resolved once into index lists (agent -> policy; agents are fixed);
- each step: per policy, ONE stack of its agents' observations and ONE forward pass over all
  (world, agent) rows routed to it, actions sampled from the runner's seeded generator;
- the fragment is preallocated tensors [steps, worlds, agents, ...] written a step at a time
  (`marl.runners.batched_fragment`); value bootstraps at truncations and at the cut, next
  observations and episode statistics come from whole-tensor ops;
- worlds reset inside the env's step (auto-reset); finished episodes are read once per fragment.

Nothing loops over worlds or agents per step. Its `sample()` returns the same `SampledBatch`
(per-policy rows, episodes, weights version) as `EnvRunner`, so the workflow, Ray runner actors,
overlap, learners and checkpoints work unchanged. `unsupported(config)` says what it does not run
(the dict path does): stateful modules, env->module connector pieces, module->env pieces other than
clipping/unsquashing, self-play pools, `batch_mode: complete_episodes`.

Seeds follow `EnvRunner`'s streams (the action generator and module init from the runner's first
stream; the simulator's seed from the key VMAS's dict path uses), so on the same seed a batched
runner and the dict-API runner over the same worlds act alike (tests compare their batches).
"""

from __future__ import annotations

import gc

import torch

from marl.data import MultiAgentBatch
from marl.data import sample_batch as sb
from marl.data.records import SampledBatch
from marl.envs.base import EnvError
from marl.envs.batched import BatchedEnv
from marl.envs.batched_families import make_batched_env
from marl.errors import ConfigError
from marl.policies import MappingError, resolve_policies
from marl.runners.actor_basics import ActorBasics
from marl.runners.batched_episodes import EpisodeCounters
from marl.runners.batched_fragment import WorldColumns
from marl.runners.batched_policy import BatchedPolicy, unsupported
from marl.runners.fragments import fragment_length
from marl.runners.seeds import batch_seed


_FROZEN = False


def _freeze_startup_objects() -> None:
    """After the first fragment, once per process: what exists then (modules, env, compiled steps, imports: ~200k
    objects) moves out of the cyclic garbage collector's sight (`gc.freeze`). Thousands of worlds end episodes
    together and each ending leaves a few dicts, so full collections come often, and each walked every one of those
    objects: frozen, 10% less time per step at 1,024 worlds of simple_spread (A/B in one process). Garbage is collected
    first; what is frozen is alive then (the run's own objects) and is freed by reference counting as ever."""
    global _FROZEN
    if not _FROZEN:
        gc.collect()
        gc.freeze()
        _FROZEN = True


class BatchedEnvRunner(ActorBasics):
    def __init__(self, config, worker_index: int = 0, incarnation: int = 0):
        # EnvRunner's streams (its first: the same actions on the same seed)
        runner_seq = self._setup(config, worker_index, incarnation, 1 + config.env_runners_cfg.num_envs_per_env_runner)[0]
        config = self.config
        reason = unsupported(config)
        if reason is not None:
            raise ConfigError(f"env_runners.batched: the batched path does not run {reason}; use env_runners.batched: false")
        env_cfg, run_cfg = config.environment_cfg, config.env_runners_cfg
        self.device = torch.device(run_cfg.device)
        self.num_worlds = self.num_envs = run_cfg.num_envs_per_env_runner
        torch_seed = self._torch_seed(runner_seq)
        self.torch_rng = torch.Generator(device=self.device).manual_seed(torch_seed)
        env_seed = batch_seed(config.debugging_cfg.seed, worker_index, incarnation)
        self.env = make_batched_env(env_cfg.env, dict(env_cfg.env_config), self.num_worlds, env_seed, self.device)
        self.possible_agents = list(self.env.agents)
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        self.fragment_length = fragment_length(config, len(self.possible_agents))
        self.mapping = config.policy_mapping()
        self.specs, agents_of = resolve_policies(self.env, config.policy_specs(), self.mapping)
        self.policy_ids = list(self.specs)
        self.module = self._build_modules(torch_seed).to(self.device).eval()
        self.masked = self.env.action_masks() is not None
        # The global state's size first: the policies' column schemas hold it (centralised critics read it).
        acting = [pid for pid in self.specs if agents_of[pid]]
        wants_state = any(sb.STATE in config.runner_columns(pid) or "state" in tuple(self.module[pid].inputs) for pid in acting)
        self.state_dim = int(self.env.state(self._zero_obs()).shape[1]) if wants_state else None
        self.policies = {pid: BatchedPolicy(self, pid, self.specs[pid], agents_of[pid]) for pid in acting}
        next_state = any(sb.NEXT_STATE in p.columns for p in self.policies.values())
        self.world = WorldColumns(self.fragment_length, self.num_worlds, self.device, self.state_dim, next_state)
        w, n = self.num_worlds, len(self.possible_agents)
        self.weights_version = 0
        self._steps_sampled = 0
        self._started = False
        self._obs: dict[str, torch.Tensor] = {}
        self.episode_counters = EpisodeCounters((worker_index << 40) + 1, self.fragment_length, w, n, self.device)
        self._policy_of = {a: p.pid for p in self.policies.values() for a in p.agents}
        self._policy_order = list(self.policies)
        self._policy_onehot = torch.zeros((n, len(self._policy_order)), dtype=torch.float64, device=self.device)
        for j, pid in enumerate(self._policy_order):
            self._policy_onehot[[self.agent_index[a] for a in self.policies[pid].agents], j] = 1.0

    def _zero_obs(self) -> dict[str, torch.Tensor] | torch.Tensor:
        zeros = {a: torch.zeros((self.num_worlds,) + tuple(self.env.observation_space(a).shape), device=self.device)
                 for a in self.possible_agents}
        return torch.stack(list(zeros.values()), dim=1) if self.env.stacked else zeros

    # -- episodes -------------------------------------------------------------------------
    def _start(self) -> None:
        self._obs = self.env.reset(seed=None)
        self.episode_counters.start()
        self._started = True

    def _step(self, t: int, explore: bool, collect: bool) -> None:
        """One step of every world: act (one pass per policy), step, record step t of the fragment."""
        world, obs = self.world, self._obs
        state = self.env.state(obs) if self.state_dim is not None else None
        masks = self.env.action_masks() if self.masked else None
        actions: dict[str, torch.Tensor] | torch.Tensor = {}  # a stacked env's: one tensor [W, N, ...]
        for p in self.policies.values():
            frag = p.fragment
            obs_p = p.stack(obs)
            mask_p = p.stack(masks) if masks is not None else None
            inputs = p.inputs(obs_p, state, mask_p)
            act, logp, vf = p.act(inputs, self.torch_rng, explore, want_logp=collect and frag.logp is not None,
                                  frozen=p.pid in self.frozen_policies)
            rows = act.view(self.num_worlds, len(p.agents), *act.shape[1:])
            env_act = p.to_env(rows)
            if self.env.stacked:
                actions = env_act if p.all_agents else self._stacked_actions(actions, p, env_act)
            else:
                actions.update(zip(p.agents, env_act.unbind(1)))  # one view per agent, made in C++
            if collect:
                frag.obs[t] = obs_p
                frag.actions[t] = rows
                if frag.mask is not None:
                    frag.mask[t] = mask_p
                if frag.logp is not None:
                    frag.logp[t] = logp.view(frag.shape[1:])
                if frag.vf is not None:
                    frag.vf[t] = (vf if vf is not None else p.values(inputs)).view(frag.shape[1:])  # (raises, naming
                    # the module, where it has no value pass)
        world.eps_id[t] = self.episode_counters.ids  # (evaluation too: finished episodes are read from them)
        world.t[t] = self.episode_counters.lengths
        if collect and state is not None and world.state is not None:
            world.state[t] = state
        result = self.env.step(actions)
        rewards = result.rewards if self.env.stacked else torch.stack(
            [result.rewards[a] for a in self.possible_agents], dim=1)  # [W, agents]
        done = result.done
        world.terminated[t], world.truncated[t] = result.terminated, result.truncated
        if collect:
            for p in self.policies.values():
                p.fragment.rewards[t] = rewards if p.all_agents else rewards[:, p.index]
        some_ended = result.final_obs is not None
        if some_ended and collect:  # what the ended worlds reached (their next episodes start in the counters)
            self._record_ends(t, result)
        self.episode_counters.after_step(t, rewards, done, some_ended)
        self._obs = result.obs

    def _stacked_actions(self, actions, p: BatchedPolicy, env_act: torch.Tensor) -> torch.Tensor:
        """A stacked env's actions [W, N, ...] with policy `p`'s agents' columns filled in."""
        if not isinstance(actions, torch.Tensor):
            actions = torch.empty((self.num_worlds, len(self.possible_agents), *env_act.shape[2:]),
                                  dtype=env_act.dtype, device=env_act.device)
        actions[:, p.index] = env_act
        return actions

    def _final_state(self, result) -> torch.Tensor:
        """The global state the ended worlds reached: the env's `final_state`, or, where it gives none and its state is
        the default (observations joined), the reached observations joined."""
        if result.final_state is not None:
            return result.final_state
        if type(self.env).state is not BatchedEnv.state:
            raise EnvError(f"env {self.config.environment_cfg.env!r} defines its own state() but its step gave no final_state where worlds "
                           "ended: return the state they reached in BatchedStep.final_state")
        return BatchedEnv.state(self.env, result.final_obs)

    def _record_ends(self, t: int, result) -> None:
        """Step t ended some worlds: the observations and state they reached; V(s') where truncated."""
        world = self.world
        final_state = self._final_state(result) if self.state_dim is not None else None
        if world.next_state is not None:
            world.next_state[t] = final_state
        truncated = bool(result.truncated.any())
        masks = self.env.action_masks() if self.masked else None
        for p in self.policies.values():
            frag = p.fragment
            final = p.stack(result.final_obs)
            if frag.next_obs is not None:
                frag.next_obs[t] = final
            if frag.next_mask is not None:
                frag.next_mask[t] = p.stack(masks)  # (auto-reset masks: a termination zeroes what they stand for)
            if frag.bootstrap is not None and truncated:
                values = p.values(p.inputs(final, final_state, None)).view(frag.shape[1:])
                frag.bootstrap[t] = torch.where(result.truncated.unsqueeze(1), values, frag.bootstrap[t])

    # -- public API (EnvRunner's) ---------------------------------------------------------------
    def sample(self, explore: bool = True) -> SampledBatch:
        """`fragment_length` steps of every world: the rows per policy and the finished episodes' metrics."""
        if not self._started:
            self._start()
        self._set_exploration_step()
        steps = self.fragment_length
        with torch.no_grad():
            self._sample_fragment(explore)
            batches = self._build()
        _freeze_startup_objects()
        env_steps = steps * self.num_worlds
        self._steps_sampled += env_steps
        return SampledBatch(MultiAgentBatch(batches, env_steps), episodes=self._episodes(steps),
                            weights_versions=[self.weights_version], runners=[self.worker_index])

    def _sample_fragment(self, explore: bool) -> None:
        """Steps every world `fragment_length` times into the fragment (the compiled rollout's runner: one call)."""
        for t in range(self.fragment_length):
            self._step(t, explore, collect=True)

    def _build(self) -> dict[str, sb.SampleBatch]:
        """Cuts the fragment: V(s) of the observations the agents act on next where a piece goes on, then rows."""
        world, obs = self.world, self._obs
        state = self.env.state(obs) if self.state_dim is not None else None
        masks = self.env.action_masks() if self.masked else None
        table = None
        if world.state is not None:
            table = world.state_table(state)
        going_on = ~world.ended[-1]
        batches = {}
        for pid, p in self.policies.items():
            frag = p.fragment
            cut_obs = p.stack(obs)
            cut_mask = p.stack(masks) if masks is not None else None
            if frag.bootstrap is not None:
                values = p.values(p.inputs(cut_obs, state, cut_mask)).view(frag.shape[1:])
                frag.bootstrap[-1] = torch.where(going_on.unsqueeze(1), values, frag.bootstrap[-1])
            batches[pid] = frag.build(world, cut_obs, cut_mask, table)
            if frag.bootstrap is not None:
                frag.bootstrap.zero_()
        return batches

    def _episodes(self, steps: int) -> list[dict]:
        """The metrics of the episodes that ended in the last `steps` steps, in the order they ended.

        Read from the fragment's tensors in one go (ids, lengths, per-agent and per-policy returns);
        only the dicts the report reads are made per episode."""
        ended = self.world.ended[:steps]
        index = tuple(ended.nonzero().T)
        if not len(index[0]):
            return []
        returns = self.episode_counters.ended_returns[index]  # [episodes, agents]
        ids, lengths = self.world.eps_id[index].tolist(), (self.world.t[index] + 1).tolist()
        totals = returns.sum(1).tolist()
        by_policy = (returns @ self._policy_onehot).tolist()  # [episodes, policies]: each policy's agents summed
        agents, pids, policy_of = self.possible_agents, self._policy_order, self._policy_of
        return [{"episode_id": eid, "return": total, "length": length, "policy_returns": dict(zip(pids, prets)),
                 "agent_returns": dict(zip(agents, rets)), "policy_of": policy_of}
                for eid, length, total, prets, rets in zip(ids, lengths, totals, by_policy, returns.tolist())]

    # -- evaluation (ActorBasics.run_evaluation) -----------------------------------------------
    def _start_evaluation(self) -> int:
        self._start()
        return int(self.episode_counters.ids[0])

    def _evaluation_steps(self, explore: bool, last_id: int | None, steps_left: int | None) -> tuple[int, list[dict]]:
        """Up to a fragment's steps of every world (fewer where `steps_left` env steps end the evaluation)."""
        steps = 0
        with torch.no_grad():
            for t in range(self.fragment_length):
                self._step(t, explore, collect=False)
                steps += self.num_worlds
                if steps_left is not None and steps >= steps_left:
                    break
        return steps, self._episodes(t + 1)

    def _end_evaluation(self) -> None:
        self.world.terminated.zero_()
        self.world.truncated.zero_()
        self._started = False  # the next sample() starts fresh episodes

    # -- checkpoints ----------------------------------------------------------------------
    def get_state(self) -> dict:
        """Generators, counters and, where the simulator can be saved, it and its episodes in progress."""
        state = {"started": self._started, "steps_sampled": self._steps_sampled,
                 "next_episode_id": self.episode_counters.next_id, "torch_rng": self.torch_rng.get_state(),
                 "frozen_policies": sorted(self.frozen_policies)}
        env_state = self.env.get_state() if self._started else None
        if env_state is not None:  # exact resume: the simulator, what the agents see, where each episode stands
            counters = self.episode_counters
            own = lambda x: x.detach().cpu().clone().numpy()  # noqa: E731  (a copy: sampling goes on in place)
            state["batched"] = {
                "env": env_state, "obs": own(self._obs) if isinstance(self._obs, torch.Tensor)
                else {a: own(o) for a, o in self._obs.items()},
                "eps_id": own(counters.ids), "ep_len": own(counters.lengths), "ep_return": own(counters.returns),
            }
        return state

    def set_state(self, state: dict) -> None:
        """Continues from `get_state()`: exactly where the simulator was saved, else with fresh episodes."""
        self.torch_rng.set_state(state["torch_rng"])
        self.episode_counters.next_id = int(state["next_episode_id"])
        self.frozen_policies = frozenset(state.get("frozen_policies", ()))
        self._steps_sampled = int(state.get("steps_sampled", 0))
        self.weights_version = -1
        saved = state.get("batched")
        if saved is None or len(saved["eps_id"]) != self.num_worlds:
            self._started = False  # the simulator cannot be saved (VMAS): fresh episodes at the next sample
            return
        self.env.set_state(saved["env"])
        as_tensor = lambda x: torch.tensor(x, device=self.device)  # noqa: E731  (a copy: the state may be reused)
        obs = saved["obs"]
        self._obs = {a: as_tensor(o) for a, o in obs.items()} if isinstance(obs, dict) else as_tensor(obs)
        self.env._last_obs = self._obs
        counters = self.episode_counters
        counters.ids, counters.lengths = as_tensor(saved["eps_id"]), as_tensor(saved["ep_len"])
        counters.returns = as_tensor(saved["ep_return"])
        self._started = True

    def set_mapping_state(self, state) -> None:
        """The mapping's state (a league's table), where it binds every agent to the policy it has now: this path
        binds agents once, at the start."""
        self.mapping.set_state(state)
        rebound = {a: pid for a in self.possible_agents if (pid := self.mapping(a, None)) != self._policy_of[a]}
        if rebound:
            raise MappingError(f"the batched path binds agents to policies once ({self._policy_of}); this mapping state "
                               f"rebinds {rebound}: run it on the dict path (env_runners.batched: false)")

    def stop(self) -> None:
        try:
            self.env.close()
        except Exception:
            pass
