"""Algorithm: builds the runtime from a config and runs its workflow graph.

`train()` pulls one item out of the workflow's report node; there is no
hand-written training loop here. PPO, and any later algorithm, differ only in
the graph and the loss their config supplies. Evaluation is a node of the
graph (`evaluate`, added by `workflow_for` when the config asks for it);
stop criteria belong to the run loop (`marl.runtime.run_loop`); checkpoint I/O to
`checkpoint.py`. This class composes the parts and keeps the public API.

Checkpoints (`save`, `restore`, `from_checkpoint`; layout and I/O in `checkpoint.py`)
hold everything a run needs to go on: weights, optimiser and connector state,
counters, report totals, every RNG (driver, learner, each runner's), each
runner's in-progress episodes and any registered component state (replay
buffers). Resume guarantee: a seeded run with synchronous sampling that is
saved after iteration N and restored -- in this process or a new one, with
the same config -- produces bit-identical weights and results to an
uninterrupted run from iteration N on, provided the envs are deterministic
given their reset seed and actions (every Gymnasium and PettingZoo env that
draws only from its seeded `np_random` is; a restore warns when a replayed
episode diverges). Restoring with a different number of env runners or env
copies, after a runner restart, or with asynchronous sampling (fragments in
flight are not saved) continues correctly but not bit-identically.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import numpy as np

from marl.checkpoint import directory as ckpt
from marl.runtime import resources
from marl.runtime.acting import ActingPolicies
from marl.runtime.evaluation import Evaluation
from marl.config.capabilities import check_action_spaces, check_joint_steps
from marl.config.sections import stop_reason
from marl.errors import CheckpointError, ConfigError
from marl.execution import SharedMetrics
from marl.execution import metrics as m
from marl.execution.ray_init import ensure_ray
from marl.learners import LearnerGroup
from marl.policies import resolve_policies
from marl.runners import EnvRunnerGroup
from marl.execution.user_code import job_runtime_env
from marl.workflow import Evaluate, ExecutionContext, Workflow
from marl.workflow.offline_ops import Record
from marl.connectors import build_policy_module
from marl.replay import make_replay_buffer
from marl.config.scenario import config_from_dict
import torch

log = logging.getLogger(__name__)


def workflow_for(config) -> Workflow:
    """The graph a config runs (what `marl graph` shows): its own or the algorithm's default, validated,
    with an `evaluate` node feeding the report when `evaluation.evaluation_interval` is set."""
    wf = config.workflow
    if wf is None:
        wf = config.default_workflow()
    elif isinstance(wf, dict):
        wf = Workflow.from_dict(wf)
    elif isinstance(wf, Workflow):
        wf = wf.copy()  # the run's own graph: compiling keeps operator state on its nodes
    else:
        raise ConfigError(f"'workflow' must be a Workflow or its YAML form, got {type(wf).__name__}")
    if config.offline_cfg.output:
        record_after_samples(wf)
    ev = config.evaluation_cfg
    if ev.evaluation_interval and not any(data.get("op") == "evaluate" for _, data in wf.graph.nodes(data=True)):
        wf.validate()
        wf.add("evaluate", Evaluate(interval=ev.evaluation_interval, parallel=ev.evaluation_parallel_to_training))
        wf.add_input(wf.report_node(), "evaluate")
    return wf.validate()


def record_after_samples(wf: Workflow) -> None:
    """`offline.output`: a `record` node right after every `sample` node (what it fed, `record` feeds now)."""

    g = wf.graph
    if any(data.get("op") == "record" for _, data in g.nodes(data=True)):
        return  # the workflow places its own
    samples = [n for n, data in g.nodes(data=True) if data.get("op") == "sample"]
    if not samples:
        raise ConfigError(f"'offline.output' records sampled batches, but workflow '{wf.name}' has no sample node")
    for node in samples:
        name = "record" if len(samples) == 1 else f"record_{node}"
        outs = [(v, dict(data)) for _, v, data in g.out_edges(node, data=True)]
        g.remove_edges_from([(node, v) for v, _ in outs])
        wf.add(name, Record(), after=node)
        for v, data in outs:
            g.add_edge(name, v, **data)


class Algorithm:
    def __init__(self, config):
        self.config = config
        logging.getLogger("marl").setLevel(config.debugging_cfg.log_level)
        seed = config.debugging_cfg.seed
        if seed is not None:  # user code (envs, mapping functions) drawing from the global generators
            random.seed(seed)
            np.random.seed(seed)
        if resources.uses_ray(config):
            # Checked before Ray is asked: Ray would queue actors no node can place and wait for ever.
            import ray

            if not ray.is_initialized() and not os.environ.get("RAY_ADDRESS"):
                resources.check_local_request(config)
            ensure_ray(resources.local_ray_cpus(config), job_runtime_env(config))
            resources.check_cluster_request(config)
        env_spec = config.env_spec()  # resolved once from one env (the build did), shipped with the config
        self.policy_specs, self.agents_of = resolve_policies(env_spec, config.policy_specs(), config.policy_mapping())
        self.possible_agents = list(env_spec.possible_agents)
        check_action_spaces(config, self.policy_specs)  # the algorithm's record, now that the spaces are known
        check_joint_steps(config, self.policy_specs, env_spec.turn_based)
        self._check_models()
        self.learners = LearnerGroup(config, self.policy_specs)
        self.runners = EnvRunnerGroup(config)
        self.metrics = SharedMetrics()
        self.workflow = workflow_for(config)
        self.replay_buffers = self._make_replay_buffers()
        self.evaluation = Evaluation(config, list(self.policy_specs))
        self.context = ExecutionContext(config, self.runners, self.learners, self.metrics, self.replay_buffers,
                                        evaluation=self.evaluation, policy_specs=self.policy_specs,
                                        agents_of=self.agents_of, possible_agents=self.possible_agents)
        # Components checkpoints keep besides what the workflow's operators hold (collected at each compile).
        # Replay buffers are among them (`save(skip=["replay/"])` leaves them out).
        self._registered = {f"replay/{pid}": buffer for pid, buffer in self.replay_buffers.items()}
        self.sync_runners()  # runners must act with the learner's weights from the first step
        self.reset_workflow()
        self.iteration = 0
        self._acting_policies = None  # `compute_actions`' policies, built on first use

    def _check_models(self) -> None:
        """Builds each policy's module once, so a bad model option is a ConfigError before any actor starts."""


        for pid, spec in self.policy_specs.items():
            model = self.config.plan_for(pid).model
            try:
                with torch.random.fork_rng(devices=[]):
                    build_policy_module(self.config, pid, spec)
            except (ValueError, TypeError) as err:
                raise ConfigError(
                    f"the model of policy '{pid}' (training.model with multi_agent.policies.{pid}.model: {model}, "
                    f"on its connectors.env_to_module output) cannot be built: {err}"
                ) from None

    def _make_replay_buffers(self) -> dict:
        """One buffer per trained policy (off-policy algorithms); each holds only its own policy's transitions."""

        seed = self.config.debugging_cfg.seed
        trained = self.config.trained_policy_ids(list(self.policy_specs))
        buffers = {}
        for i, pid in enumerate(trained):
            spec = self.config.plan_for(pid).replay
            if spec is not None:
                buffers[pid] = make_replay_buffer(**spec, seed=None if seed is None else int(seed) + 7919 * (i + 1))
        return buffers

    def reset_workflow(self) -> None:
        """(Re)builds the workflow's iterators from fresh operator state (a restore then sets the saved state)."""
        self.context.checkpointables.clear()
        self.context.checkpointables.update(self._registered)
        self._results = self.workflow.compile(self.context)

    def sync_runners(self) -> None:
        """Sends the learner's weights to every training runner."""
        weights = self.learners.get_weights()
        self.runners.sync_weights(weights)
        self.metrics.counters[m.WEIGHTS_VERSION] = weights["version"]

    # -- the user's verbs -----------------------------------------------------
    def train(self) -> dict:
        """One iteration: one item out of the workflow's report node (its evaluation included when one is due)."""
        result = next(self._results)
        self.iteration += 1
        result["iteration"] = self.iteration
        result["fault/runner_restarts"] = self.runners.restarts
        return result

    def evaluate(self, duration: int | None = None, unit: str | None = None, explore: bool | None = None, *,
                 num_episodes: int | None = None, opponent: str | None = None) -> dict:
        """One evaluation with the current weights on the evaluation runners; `evaluation/...` results.

        `duration`, `unit` ("episodes" | "env_steps") and `explore` default to the
        config's `evaluation` section; `num_episodes=n` is `duration=n, unit="episodes"`.
        `opponent` (self-play runs): a fixed opponent for this evaluation, "random" or an
        RLModule class path, instead of `self_play.evaluation_opponent`.
        """
        if num_episodes is not None:
            duration, unit = num_episodes, "episodes"
        evaluator = self.evaluation.evaluator(opponent)
        evaluator.start(self.learners.get_weights(), duration, unit, explore, self.metrics.counters[m.ENV_STEPS_SAMPLED])
        return evaluator.collect()

    # -- acting outside training (RLlib's verbs; `marl.load_policy` does the same from a checkpoint) --
    def get_policy(self, policy_id: str = "default_policy"):
        """`policy_id` as a `marl.inference.Policy` acting with the current weights (env->module connectors,
        module, module->env connectors)."""
        return self._acting().policy(policy_id)

    def compute_single_action(self, observation, *, policy_id: str | None = None, agent_id: str = "agent_0",
                              explore: bool = False):
        """The action for one agent's observation, as the env takes it: greedy, or sampled with `explore`.
        The policy is `policy_id`'s, else the one `multi_agent.policy_mapping` gives `agent_id`; a recurrent
        policy carries `agent_id`'s state from call to call (`compute_actions(..., new_episode=True)` resets it)."""
        return self._acting().compute_single_action(observation, policy_id=policy_id, agent_id=agent_id, explore=explore)

    def compute_actions(self, observations: dict, *, explore: bool = False, new_episode: bool = False) -> dict:
        """{agent: action} for an env's observation dict {agent: obs}, each agent acting with the policy the
        run's `multi_agent.policy_mapping` gives it; `new_episode` resets those agents' recurrent and
        connector state first."""
        return self._acting().compute_actions(observations, explore=explore, new_episode=new_episode)

    def _acting(self) -> ActingPolicies:
        if self._acting_policies is None:
            self._acting_policies = ActingPolicies(self)
        return self._acting_policies

    def stop_reason(self, result: dict) -> str | None:
        """Which `stop` criterion the result meets, if any (the stop section's rule, `sections.stop_reason`)."""
        return stop_reason(self.config.stop_cfg, result)

    def get_weights(self) -> dict:
        return self.learners.get_weights()

    # -- checkpoints ----------------------------------------------------------
    def register_checkpointable(self, name: str, component) -> None:
        """Adds a component (with get_state() and set_state(state)) that checkpoints save and restore by `name`.

        The workflow's operators keep theirs through the operator protocol
        (`get_state`/`set_state`), collected when the graph is compiled.
        """
        if not (callable(getattr(component, "get_state", None)) and callable(getattr(component, "set_state", None))):
            raise TypeError(f"checkpointable '{name}' needs get_state() and set_state(state) methods")
        self._registered[name] = component
        self.context.checkpointables[name] = component

    def save(self, path: str | os.PathLike, *, skip: tuple[str, ...] | list[str] = ()) -> str:
        """Writes a checkpoint directory atomically; returns its path (see `checkpoint.save_algorithm`).

        `skip`: registered components to leave out (a name, or a prefix ending
        in '/', e.g. "replay/" for every replay buffer); they keep their fresh
        state at restore.
        """
        return ckpt.save_algorithm(self, path, skip=skip)

    def restore(self, path: str | os.PathLike) -> None:
        """Continues from a checkpoint of the same algorithm and policies (any number of env runners)."""
        ckpt.restore_algorithm(self, path)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, overrides: list[str] | None = None, config=None) -> "Algorithm":
        """An algorithm rebuilt from a checkpoint's resolved config and restored.

        `overrides` (`key=value`, as on the command line) change the config
        first, e.g. `["env_runners.num_env_runners=4"]`; or pass a whole
        `config` (needed when the policy mapping is a Python callable).
        """

        path = Path(path)
        manifest = ckpt.read_manifest(path)
        if config is None:
            data = dict(manifest["config"])
            mapping = data.get("multi_agent", {}).get("policy_mapping")
            if isinstance(mapping, str) and mapping.startswith("<callable"):
                raise CheckpointError(
                    f"checkpoint '{path}': its policy mapping is a Python callable ({mapping}); build the config in "
                    "Python and call Algorithm.from_checkpoint(path, config=config)"
                )
            config = config_from_dict(data, overrides, where=f"checkpoint '{path}'")
        elif overrides:
            raise ValueError("from_checkpoint takes overrides or a config, not both")
        algo = config.build()
        try:
            algo.restore(path)
        except BaseException:
            algo.stop()
            raise
        return algo

    def stop(self, reason: str | None = None) -> None:
        """Releases runners, learners and operators; `reason` (why the run ended) first goes to every operator's
        `end` (the policy server tells its clients)."""
        if reason is not None:
            for _, data in self.workflow.graph.nodes(data=True):
                data["operator"].end(reason)
        for _, data in self.workflow.graph.nodes(data=True):  # operators holding files open (record) publish them
            data["operator"].close()
        self.runners.stop()
        self.learners.stop()
        self.evaluation.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
