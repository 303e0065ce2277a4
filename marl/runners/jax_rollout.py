"""The compiled rollout: a JaxMARL env's whole fragment sampled by ONE jitted call (`env_runners.compiled_rollout`).

At a few worlds the batched path's cost is per step, not per row: one jitted env call (~150 us of call
overhead on the CPU) and one acting pass per step, where JaxMARL's own baselines run the rollout inside
one compiled `jax.lax.scan`. This runs the same: a scan over the fragment's steps of

- the policies' passes in jax.numpy (`marl.modules.jax_acting.JaxActor`, the JAX form of the module's NumPy actor,
  `RLModule.numpy_actor`; each policy's agents as a static index into the stacked [W, N, ...] observations), its
  weights passed as jit arguments, so a weight sync costs an upload and no recompilation;
- the draws from the runner's JAX key (not its torch generator: the two paths draw different numbers);
- the env's own step (`JaxMarlEnv.step_body`, the body the step-by-step path jits: the same code steps
  the worlds, auto-reset and the packed [W, K] output included);
- V(the observation reached) where a world truncated (bootstrap), under `lax.cond` (most steps have none).

The call returns the packed env outputs [T, W, K] and each policy's actions, log-probs and values
[T, W, A]; `fill` writes the runner's fragment columns and episode counters (`EpisodeCounters.after_fragment`)
from them with whole-tensor ops (no loop over steps, worlds or agents). `why_not(runner)` says what it cannot run.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from marl.connectors.build import module_to_env_pipeline
from marl.connectors.module_to_env import ClipActions, UnsquashActions
from marl.envs.jaxmarl import JaxMarlEnv
from marl.errors import ConfigError
from marl.modules.jax_acting import JaxActor
from marl.runners.batched_runner import BatchedEnvRunner

log = logging.getLogger(__name__)
_COMPILED: dict[tuple, object] = {}  # (env step body, steps, policies' structure) -> the jitted rollout


def why_not(runner) -> str | None:
    """Why the compiled rollout cannot sample for `runner` (None: it can)."""
    env = runner.env
    if not isinstance(env, JaxMarlEnv):
        return f"env {runner.config.environment_cfg.env!r} is not a JaxMARL env (jaxmarl.*)"
    if runner.device.type != "cpu":
        return f"env_runners.device {str(runner.device)!r} (it runs on JAX's CPU backend)"
    if not env.stacked:
        return "the env's agents differ in observation or action spaces (it steps them stacked, [worlds, agents, ...])"
    for p in runner.policies.values():
        actor = p.module.numpy_actor()
        what = f"policy '{p.pid}': module {type(p.module).__name__}"
        if actor is None:
            return (f"{what} offers no plain acting pass (RLModule.numpy_actor: the default MLP's Linear layers and "
                    "known activations, Discrete or Box actions)")
        if not actor.reads_obs_only:
            return f"{what}'s acting pass reads more than its observations (agent ids, a global state)"
        if actor.vf is None and (p.fragment.vf is not None or p.fragment.bootstrap is not None):
            return f"{what} has no value head, and its algorithm records value predictions"
        if p.wants_state or p.wants_agent_index:
            return f"{what} reads {'the global state' if p.wants_state else 'agent ids'}"
        if p.fragment.next_obs is not None:  # (no module it mirrors records them today: DQN's, SAC's act in torch)
            return f"policy '{p.pid}': its algorithm records next observations"
    if runner.world.state is not None:
        return "a policy's algorithm records the global state"
    return None


def compiled_rollout(runner) -> CompiledRollout | None:
    """The runner's compiled rollout per `env_runners.compiled_rollout`, or None (it steps one call at a time)."""
    setting = runner.config.env_runners_cfg.compiled_rollout
    if setting is False:
        return None
    reason = why_not(runner)
    if reason is None:
        return CompiledRollout(runner)
    if setting is True:
        raise ConfigError(f"env_runners.compiled_rollout: true cannot run here: {reason}; use auto or false")
    if isinstance(runner.env, JaxMarlEnv):  # (elsewhere it never applies: nothing to say)
        log.info("%s: one env call per step (the compiled rollout does not run here: %s)",
                 runner.config.environment_cfg.env, reason)
    return None


class _Policy:
    """One policy's static side in the scan (its agents, what its algorithm records) and its pass in JAX."""

    def __init__(self, runner, p):
        self.pid, self.index = p.pid, tuple(int(i) for i in p.index)
        pieces = module_to_env_pipeline(runner.config, p.pid, runner.specs[p.pid].action_space).pieces.values()
        self.actor = JaxActor(p.module.numpy_actor(), p.wants_mask, tuple(  # (kind, low, high) in the pipeline's order
            (type(piece), *piece.bounds) for piece in pieces
            if isinstance(piece, (ClipActions, UnsquashActions)) and piece.bounds is not None))
        self.continuous, self.masked = self.actor.continuous, p.wants_mask
        self.want_vf, self.want_boot = p.fragment.vf is not None, p.fragment.bootstrap is not None

    def signature(self) -> tuple:
        return self.index, self.want_vf, self.want_boot, self.actor.signature()


class CompiledRolloutRunner(BatchedEnvRunner):
    """The batched runner whose explorative fragments are one jitted scan (`compiled`: None where it does not apply
    under `compiled_rollout: auto`; then, and for greedy or frozen acting, it steps one call at a time)."""

    def __init__(self, config, worker_index: int = 0, incarnation: int = 0):
        super().__init__(config, worker_index, incarnation)
        self.compiled = compiled_rollout(self)

    def _sample_fragment(self, explore: bool) -> None:
        if self.compiled is not None and explore and not self.frozen_policies:
            self._obs = self.compiled.sample(self)
        else:
            super()._sample_fragment(explore)

    def get_state(self) -> dict:
        state = super().get_state()
        if self.compiled is not None:  # the compiled rollout's draws: its JAX key
            state["rollout_key"] = self.compiled.key.copy()
        return state

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        if self.compiled is not None and "rollout_key" in state:
            self.compiled.key = np.array(state["rollout_key"])


def _build(env: JaxMarlEnv, policies: list[_Policy], steps: int):
    """The jitted rollout: (env key, env state, packed [W, K], key, weights) -> (carry, outputs over T steps)."""
    import jax
    import jax.numpy as jnp

    w, n = env.num_worlds, len(env.agents)
    first = env.agents[0]

    columns = env.packed_columns
    obs_cols, final_cols = columns["obs"], columns["final"]
    mask_cols = columns["mask"] if env.has_action_masks else None
    truncated_col = columns["flags"].start + 1
    act_shape = tuple(env.action_space(first).shape)
    act_dtype = jnp.int32 if env.all_discrete else jnp.float32
    n_actions = int(getattr(env.action_space(first), "n", 0))
    step_body = env.step_body

    def body(carry, draws):
        env_key, env_state, packed, params = carry
        obs = packed[:, obs_cols].reshape(w, n, -1)
        masks = packed[:, mask_cols].reshape(w, n, -1) if mask_cols is not None else None
        joint = jnp.zeros((w, n) + act_shape, act_dtype)
        outs = []
        for pol, prm, draw in zip(policies, params, draws):
            index, rows = np.asarray(pol.index), w * len(pol.index)
            actions, env_actions, logp, values = pol.actor.act(prm, obs[:, index].reshape(rows, -1), masks[:, index].reshape(
                rows, -1) if pol.masked else None, draw, pol.want_vf)
            env_actions = env_actions.reshape((w, len(index)) + act_shape).astype(act_dtype)
            joint = joint.at[:, index].set(env_actions)
            outs.append((actions, logp, values))
        env_key, env_state, reached = step_body(env_key, env_state, joint.reshape(w, -1))
        truncated = reached[:, truncated_col] > 0.5
        final = reached[:, final_cols].reshape(w, n, -1)
        boots = []
        for pol, prm in zip(policies, params):
            if pol.want_boot:  # V(what a truncated world reached); most steps truncate none
                index = np.asarray(pol.index)
                boots.append(jax.lax.cond(truncated.any(), lambda f: pol.actor.values(prm, f[:, index].reshape(
                    w * len(index), -1)).reshape(w, len(index)),
                                          lambda f: jnp.zeros((w, len(index)), jnp.float32), final))
            else:
                boots.append(None)
        return (env_key, env_state, reached, params), (reached, outs, boots)

    def rollout(env_key, env_state, packed, key, params):
        # The fragment's draws made at once before the scan (one vectorised call per policy: inside the scan, a draw
        # per step cost ~10% of the step), handed to each step as its slice.
        key, *keys = jax.random.split(key, 1 + len(policies))
        draws = [jax.random.normal(k, (steps, w * len(pol.index)) + act_shape, jnp.float32) if pol.continuous
                 else jax.random.uniform(k, (steps, w * len(pol.index), n_actions), jnp.float32,
                                         minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)
                 for pol, k in zip(policies, keys)]
        carry, ys = jax.lax.scan(body, (env_key, env_state, packed, params), draws, length=steps)
        return (*carry[:3], key), ys

    return jax.jit(rollout)


class CompiledRollout:
    """A runner's compiled rollout: `sample(runner)` fills its fragment and bookkeeping for the next fragment."""

    def __init__(self, runner):
        import jax

        self._jax = jax
        self.env: JaxMarlEnv = runner.env
        self.policies = [_Policy(runner, p) for p in runner.policies.values()]
        self.steps = runner.fragment_length
        signature = (self.env.step_body, self.steps, tuple(p.signature() for p in self.policies))
        if signature not in _COMPILED:  # one compilation per structure in a process (probes, restored runners)
            _COMPILED[signature] = _build(self.env, self.policies, self.steps)
        self._fn = _COMPILED[signature]
        seed = int(runner.torch_rng.initial_seed()) % (1 << 32)
        self.key = np.asarray(jax.random.PRNGKey(seed))  # (saved with the runner's state)

    def sample(self, runner) -> torch.Tensor:
        """One fragment of every world into the runner's fragment tensors and episode counters; returns the
        observations the agents act on next (the env's, as its `reset` and `step` hand them out)."""
        jax, env = self._jax, self.env
        params = [p.actor.weights(jax) for p in self.policies]
        key, state, start = env.step_state
        (key, state, last, self.key), (reached, outs, boots) = self._fn(key, state, start, self.key, params)
        self.key = np.asarray(self.key)
        next_obs = env.adopt(key, state, last)
        out = torch.from_numpy(np.asarray(reached))  # [T, W, K]: what each step reached (after auto-reset)
        here = torch.cat([torch.from_numpy(start).unsqueeze(0), out[:-1]])  # what each step acted on
        fill(runner, here, out, [(p, *(None if x is None else torch.from_numpy(np.asarray(x)) for x in o), b if b is None
                                      else torch.from_numpy(np.asarray(b))) for p, o, b in zip(self.policies, outs, boots)])
        return next_obs


def fill(runner, here: torch.Tensor, out: torch.Tensor, per_policy: list) -> None:
    """The fragment's columns from the packed env arrays (acted on, reached: [T, W, K]) and each policy's
    (policy, actions, log-probs, values, bootstrap values) [T, W, A]; then the episode bookkeeping. (The columns of
    on-policy actor-critics: `why_not` refuses algorithms that record next observations or the global state.)"""
    env, world = runner.env, runner.world
    steps, w, n = here.shape[0], env.num_worlds, len(env.agents)
    shape = tuple(env.observation_space(env.agents[0]).shape)

    def block(x: torch.Tensor, part: str, *tail) -> torch.Tensor:
        return x[..., env.packed_columns[part]].reshape(steps, w, n, *tail)

    obs = block(here, "obs", *shape)
    flags = out[..., env.packed_columns["flags"]] > 0.5
    terminated, truncated = flags[..., 0], flags[..., 1]
    world.terminated.copy_(terminated)
    world.truncated.copy_(truncated)
    rewards = out[..., env.packed_columns["rewards"]]
    masks = block(here, "mask", -1) if env.has_action_masks else None
    for pol, actions, logp, values, boot in per_policy:
        frag = runner.policies[pol.pid].fragment
        index = list(pol.index)
        frag.obs.copy_(obs[:, :, index])
        frag.actions.copy_(actions.view(frag.actions.shape))
        frag.rewards.copy_(rewards[:, :, index])
        if frag.mask is not None:
            frag.mask.copy_(masks[:, :, index])
        if frag.logp is not None:
            frag.logp.copy_(logp.view(frag.logp.shape))
        if frag.vf is not None:
            frag.vf.copy_(values.view(frag.vf.shape))
        if frag.bootstrap is not None:
            frag.bootstrap.copy_(torch.where(truncated.unsqueeze(-1), boot, 0.0))
    runner.episode_counters.after_fragment(world, rewards, terminated | truncated)

