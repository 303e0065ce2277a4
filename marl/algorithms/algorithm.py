"""Algorithm: builds the runtime from a config and runs its workflow graph.

`train()` pulls one item out of the workflow's report node; there is no
hand-written training loop here. PPO, and any later algorithm, differ only in
the graph and the loss their config supplies.

Checkpoints (`save`, `restore`, `from_checkpoint`; layout in `checkpoint.py`)
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

import dataclasses
import logging
import math
import os
import random
from pathlib import Path

import numpy as np

from marl.algorithms import checkpoint as ckpt
from marl.algorithms.evaluation import Evaluator
from marl.algorithms.sections import ConfigError
from marl.algorithms.state_files import StateFileError, read_tree, write_tree
from marl.envs import make_env
from marl.execution import SharedMetrics
from marl.execution import metrics as m
from marl.learners import LearnerGroup
from marl.policies import resolve_policies
from marl.runners import EnvRunnerGroup
from marl.workflow import ExecutionContext, Workflow

log = logging.getLogger(__name__)

CheckpointError = ckpt.CheckpointError


def ensure_ray(num_cpus: int | None = None) -> None:
    """Joins RAY_ADDRESS if set, else starts a local Ray (never a stale cluster left by a killed run)."""
    import ray

    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), include_dashboard=False)


class Algorithm:
    def __init__(self, config):
        self.config = config
        logging.getLogger("marl").setLevel(config.debugging_cfg.log_level)
        seed = config.debugging_cfg.seed
        if seed is not None:  # user code (envs, mapping functions) drawing from the global generators
            random.seed(seed)
            np.random.seed(seed)
        if config.env_runners_cfg.num_env_runners > 0 or config.learners_cfg.num_learners > 0:
            needed = config.env_runners_cfg.num_env_runners * config.env_runners_cfg.num_cpus_per_env_runner
            needed += config.learners_cfg.num_learners * config.learners_cfg.num_cpus_per_learner
            ensure_ray(max(int(math.ceil(needed)), os.cpu_count() or 1))
        config.global_state_spec()  # centralised critics: probed once here, shipped with the config
        probe = make_env(config.environment_cfg.env, dict(config.environment_cfg.env_config))
        try:
            self.policy_specs, self.agents_of = resolve_policies(probe, config.policy_specs(), config.policy_mapping())
        finally:
            probe.close()
        self._check_models()
        self.learners = LearnerGroup(config, self.policy_specs)
        self.runners = EnvRunnerGroup(config)
        self.metrics = SharedMetrics()
        self.workflow = self._make_workflow()
        self.replay_buffers = self._make_replay_buffers()
        self._context = ExecutionContext(config, self.runners, self.learners, self.metrics, self.replay_buffers)
        # Components checkpoints keep besides what the workflow's operators register when compiled.
        # Replay buffers are among them (`save(skip=["replay/"])` leaves them out).
        self._registered = {f"replay/{pid}": buffer for pid, buffer in self.replay_buffers.items()}
        self._sync_runners()  # runners must act with the learner's weights from the first step
        self._compile()
        self.iteration = 0
        self._evaluator: Evaluator | None = None
        self._saved_evaluation_states: list[dict] | None = None
        self._opponent_evaluators: dict[str, Evaluator] = {}

    def _check_models(self) -> None:
        """Builds each policy's module once, so a bad model option is a ConfigError before any actor starts."""
        import torch

        from marl.connectors import build_policy_module

        for pid, spec in self.policy_specs.items():
            model = self.config.model_for(pid)
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
        from marl.replay import make_replay_buffer

        seed = self.config.debugging_cfg.seed
        trained = self.config.trained_policy_ids(list(self.policy_specs))
        buffers = {}
        for i, pid in enumerate(trained):
            spec = self.config.replay_buffer_config_for(pid)
            if spec is not None:
                buffers[pid] = make_replay_buffer(**spec, seed=None if seed is None else int(seed) + 7919 * (i + 1))
        return buffers

    def _make_workflow(self) -> Workflow:
        wf = self.config.workflow
        if wf is None:
            wf = self.config.default_workflow()
        elif isinstance(wf, dict):
            wf = Workflow.from_dict(wf)
        elif not isinstance(wf, Workflow):
            raise ConfigError(f"'workflow' must be a Workflow or its YAML form, got {type(wf).__name__}")
        return wf.validate()

    def _compile(self) -> None:
        """(Re)builds the workflow's iterators; operators register their counters anew."""
        self._context.checkpointables.clear()
        self._context.checkpointables.update(self._registered)
        self._results = self.workflow.compile(self._context)

    def _sync_runners(self) -> None:
        weights = self.learners.get_weights()
        self.runners.sync_weights(weights)
        self.metrics.counters[m.WEIGHTS_VERSION] = weights["version"]

    # -- the user's verbs -----------------------------------------------------
    def train(self) -> dict:
        """One iteration: one item out of the workflow's report node (plus an evaluation when one is due)."""
        ev = self.config.evaluation_cfg
        due = bool(ev.evaluation_interval) and (self.iteration + 1) % ev.evaluation_interval == 0
        parallel = due and ev.evaluation_parallel_to_training
        if parallel:  # the evaluation runners play the current weights while this iteration trains
            self._get_evaluator().start(self.learners.get_weights(), exploration_step=self.metrics.counters[m.ENV_STEPS_SAMPLED])
        result = next(self._results)
        self.iteration += 1
        result["iteration"] = self.iteration
        result["fault/runner_restarts"] = self.runners.restarts
        if due:
            result.update(self._get_evaluator().collect() if parallel else self.evaluate())
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
        evaluator = self._get_evaluator(opponent)
        evaluator.start(self.learners.get_weights(), duration, unit, explore, self.metrics.counters[m.ENV_STEPS_SAMPLED])
        return evaluator.collect()

    def _get_evaluator(self, opponent: str | None = None) -> Evaluator:
        sp = self.config.self_play()
        if opponent is not None and (sp is None or opponent != sp.evaluation_opponent):
            if sp is None:
                raise ValueError(f"evaluate(opponent={opponent!r}) needs a self-play run (multi_agent.self_play)")
            if opponent not in self._opponent_evaluators:  # runners of its own, kept for the next call
                config = self.config.copy()
                config.multi_agent_cfg.self_play = dataclasses.asdict(sp.with_opponent(opponent))
                self._opponent_evaluators[opponent] = Evaluator(config, list(self.policy_specs))
            return self._opponent_evaluators[opponent]
        if self._evaluator is None:
            self._evaluator = Evaluator(self.config, list(self.policy_specs))
            if self._saved_evaluation_states:
                self._evaluator.set_states(self._saved_evaluation_states)
                self._saved_evaluation_states = None
        return self._evaluator

    def stop_reason(self, result: dict) -> str | None:
        """Which `stop` criterion the result meets, if any."""
        s = self.config.stop_cfg
        ret = result.get("episode_return_mean", math.nan)
        if s.episode_return_mean is not None and not math.isnan(ret) and ret >= s.episode_return_mean:
            return f"episode_return_mean {ret:.2f} >= {s.episode_return_mean}"
        if s.env_steps_total is not None and result["env_steps_total"] >= s.env_steps_total:
            return f"env_steps_total {result['env_steps_total']} >= {s.env_steps_total}"
        if s.time_total_s is not None and result["time_total_s"] >= s.time_total_s:
            return f"time_total_s {result['time_total_s']:.1f} >= {s.time_total_s}"
        if s.iterations is not None and result["iteration"] >= s.iterations:
            return f"iterations {result['iteration']} >= {s.iterations}"
        return None

    def get_weights(self) -> dict:
        return self.learners.get_weights()

    # -- checkpoints ----------------------------------------------------------
    def register_checkpointable(self, name: str, component) -> None:
        """Adds a component (with get_state() and set_state(state)) that checkpoints save and restore by `name`.

        Operators register their own state on the ExecutionContext the same way
        (`ctx.checkpointables[name] = component`), e.g. replay buffers.
        """
        if not (callable(getattr(component, "get_state", None)) and callable(getattr(component, "set_state", None))):
            raise TypeError(f"checkpointable '{name}' needs get_state() and set_state(state) methods")
        self._registered[name] = component
        self._context.checkpointables[name] = component

    def save(self, path: str | os.PathLike, *, skip: tuple[str, ...] | list[str] = ()) -> str:
        """Writes a checkpoint directory atomically; returns its path.

        `skip`: registered components to leave out (a name, or a prefix ending
        in '/', e.g. "replay/" for every replay buffer); they keep their fresh
        state at restore.
        """
        from safetensors.numpy import save_file

        from marl.algorithms.algorithm_config import _plain
        from marl.algorithms.state_files import fsync_file

        path = Path(path)
        tmp = ckpt.new_temp_directory(path)
        learner = self.learners.get_state()
        weights = learner["weights"]
        trained = self.config.trained_policy_ids(list(self.policy_specs))
        policies, taken = {}, set()
        (tmp / "policies").mkdir()
        for pid, state in weights["modules"].items():
            file = f"policies/{ckpt.file_stem(pid, taken)}.safetensors"
            save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(tmp / file))
            fsync_file(tmp / file)
            spec = self.policy_specs[pid]
            policies[pid] = {
                "file": file,
                "module_class": _plain(self.config.module_class_for(spec)),
                "model": _plain(self.config.model_for(pid)),
                "observation_space": ckpt.space_to_json(spec.observation_space),
                "action_space": ckpt.space_to_json(spec.action_space),
                "trained": pid in trained,
            }
        ckpt.save_step("policies_written")
        learner["weights"] = {k: v for k, v in weights.items() if k != "modules"}  # the weights are in policies/
        write_tree(learner, tmp / "learner", "state")
        ckpt.save_step("learner_written")
        runner_states = self.runners.get_states()
        for i, state in enumerate(runner_states):
            write_tree(state, tmp / "runners", str(i))
        evaluation_states = self._evaluator.get_states() if self._evaluator is not None else []
        for i, state in enumerate(evaluation_states):
            write_tree(state, tmp / "evaluation_runners", str(i))
        ckpt.save_step("runners_written")
        extra, taken = {}, set()
        for name, component in self._context.checkpointables.items():
            if any(name == s or (s.endswith("/") and name.startswith(s)) for s in skip):
                continue
            stem = ckpt.file_stem(name, taken)
            write_tree(component.get_state(), tmp / "extra", stem)
            extra[name] = stem
        ckpt.save_step("extra_written")
        import torch

        write_tree(
            {
                "iteration": self.iteration,
                "counters": dict(self.metrics.counters),
                "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
            },
            tmp,
            "algorithm",
        )
        ckpt.write_manifest(tmp, {
            "schema_version": ckpt.SCHEMA_VERSION,
            "marl_version": ckpt.marl_version(),
            "algo": self.config.algo_name,
            "config": self.config.to_dict(),
            "iteration": self.iteration,
            "weights_version": weights["version"],
            "counters": dict(self.metrics.counters),  # for people and tools; restore reads algorithm.json
            "policies": policies,
            "runners": len(runner_states),
            "evaluation_runners": len(evaluation_states),
            "extra": extra,
        })
        ckpt.save_step("manifest_written")
        ckpt.commit_directory(tmp, path)
        return str(path)

    def restore(self, path: str | os.PathLike) -> None:
        """Continues from a checkpoint of the same algorithm and policies (any number of env runners)."""
        path = Path(path)
        manifest = ckpt.read_manifest(path)
        self._check_compatible(path, manifest)
        try:
            if "v1" in manifest:
                self._restore_v1(path, manifest)
            else:
                self._restore_v2(path, manifest)
        except StateFileError as err:
            raise CheckpointError(f"checkpoint '{path}' is damaged: {err}") from None
        self._sync_runners()

    def _check_compatible(self, path: Path, manifest: dict) -> None:
        algo = manifest.get("algo")
        if algo != self.config.algo_name:
            raise CheckpointError(f"checkpoint '{path}' is a {algo} checkpoint; this algorithm is {self.config.algo_name}")
        saved, ours = set(manifest["policies"]), set(self.policy_specs)
        if saved != ours:
            raise CheckpointError(
                f"checkpoint '{path}' has policies {sorted(saved)}; this algorithm has {sorted(ours)} "
                f"(missing: {sorted(ours - saved)}, extra: {sorted(saved - ours)})"
            )

    def _load_learner(self, path: Path, learner: dict) -> None:
        trained = set(self.config.trained_policy_ids(list(self.policy_specs)))
        learner["optimizers"] = {pid: s for pid, s in learner["optimizers"].items() if pid in trained}
        try:
            self.learners.set_state(learner)
        except (RuntimeError, KeyError, ValueError) as err:
            raise CheckpointError(
                f"checkpoint '{path}' does not fit this algorithm's modules: {str(err).splitlines()[0]}"
            ) from None

    def _restore_v2(self, path: Path, manifest: dict) -> None:
        import torch

        learner = read_tree(path / "learner", "state")
        learner["weights"]["modules"] = {pid: ckpt.load_policy_weights(path, manifest, pid) for pid in manifest["policies"]}
        # A fresh compile: operators start from clean buffers; their counters and the report's totals are set below.
        self._compile()
        self.metrics.timers.clear()
        self._load_learner(path, learner)
        algorithm = read_tree(path, "algorithm")
        self.iteration = int(algorithm["iteration"])
        self.metrics.counters.clear()
        self.metrics.counters.update(algorithm["counters"])
        self.metrics.drain_episodes()
        runner_states = [read_tree(path / "runners", str(i)) for i in range(manifest["runners"])]
        self.runners.set_states(runner_states)
        evaluation_states = [read_tree(path / "evaluation_runners", str(i)) for i in range(manifest["evaluation_runners"])]
        if self._evaluator is not None:
            self._evaluator.set_states(evaluation_states)
        else:
            self._saved_evaluation_states = evaluation_states or None
        for name, stem in manifest["extra"].items():
            component = self._context.checkpointables.get(name)
            if component is None:
                log.warning("checkpoint '%s' holds state for '%s', which this algorithm does not have; ignored", path, name)
                continue
            component.set_state(read_tree(path / "extra", stem))
        for name in set(self._context.checkpointables) - set(manifest["extra"]):
            log.warning("checkpoint '%s' has no state for '%s'; it starts fresh", path, name)
        rng = algorithm["rng"]  # last: nothing above may draw from the driver's generators afterwards
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.set_rng_state(rng["torch"])

    def _restore_v1(self, path: Path, manifest: dict) -> None:
        """Schema 1: weights, optimisers, connectors and counters; runners start new episodes."""
        import torch

        modules = {pid: ckpt.load_policy_weights(path, manifest, pid) for pid in manifest["policies"]}
        connectors = {
            pid: {k: (float(v) if k == "count" else np.asarray(v)) for k, v in s.items()}
            for pid, s in manifest["v1"]["connectors"].items()
        }
        try:
            optimizers = torch.load(path / manifest["v1"]["optimizers"], weights_only=True)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint '{path}' is incomplete: {manifest['v1']['optimizers']} is missing") from None
        learner = {"weights": {"version": manifest["weights_version"], "modules": modules, "connectors": connectors},
                   "optimizers": optimizers}
        self._load_learner(path, learner)
        self.metrics.counters.clear()
        self.metrics.counters.update(manifest["counters"])
        self.iteration = manifest["iteration"]
        log.warning("checkpoint '%s' has schema version 1: no runner or RNG state, the run goes on with new episodes", path)

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike, overrides: list[str] | None = None, config=None) -> "Algorithm":
        """An algorithm rebuilt from a checkpoint's resolved config and restored.

        `overrides` (`key=value`, as on the command line) change the config
        first, e.g. `["env_runners.num_env_runners=4"]`; or pass a whole
        `config` (needed when the policy mapping is a Python callable).
        """
        from marl.algorithms.scenario import config_from_dict

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

    def stop(self) -> None:
        self.runners.stop()
        self.learners.stop()
        if self._evaluator is not None:
            self._evaluator.stop()
        for evaluator in self._opponent_evaluators.values():
            evaluator.stop()
        self._opponent_evaluators.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
