"""Algorithm: builds the runtime from a config and runs its workflow graph.

`train()` pulls one item out of the workflow's report node; there is no
hand-written training loop here. PPO, and any later algorithm, differ only in
the graph and the loss their config supplies.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from marl.envs import make_env
from marl.execution import SharedMetrics
from marl.execution import metrics as m
from marl.learners import LearnerGroup
from marl.policies import resolve_policies
from marl.runners import EnvRunner, EnvRunnerGroup
from marl.workflow import ExecutionContext, Workflow

CHECKPOINT_SCHEMA = 1


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
        self.learners = LearnerGroup(config, self.policy_specs)
        self.runners = EnvRunnerGroup(config)
        self.metrics = SharedMetrics()
        self.workflow = self._make_workflow()
        self.replay_buffers = self._make_replay_buffers()
        self._context = ExecutionContext(config, self.runners, self.learners, self.metrics, self.replay_buffers)
        self._sync_runners()  # runners must act with the learner's weights from the first step
        self._results = self.workflow.compile(self._context)
        self.iteration = 0
        self._eval_runner: EnvRunner | None = None

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
            from marl.algorithms.sections import ConfigError

            raise ConfigError(f"'workflow' must be a Workflow or its YAML form, got {type(wf).__name__}")
        return wf.validate()

    def _sync_runners(self) -> None:
        weights = self.learners.get_weights()
        self.runners.sync_weights(weights)
        self.metrics.counters[m.WEIGHTS_VERSION] = weights["version"]

    # -- the user's verbs -----------------------------------------------------
    def train(self) -> dict:
        """One iteration: one item out of the workflow's report node."""
        result = next(self._results)
        self.iteration += 1
        result["iteration"] = self.iteration
        result["fault/runner_restarts"] = self.runners.restarts
        interval = self.config.evaluation_cfg.evaluation_interval
        if interval and self.iteration % interval == 0:
            result.update(self.evaluate())
        return result

    def evaluate(self, num_episodes: int | None = None) -> dict:
        """Episodes with the current weights on a separate in-process runner (greedy unless configured)."""
        cfg = self.config.evaluation_cfg
        n = num_episodes or cfg.evaluation_duration
        if self._eval_runner is None:
            self._eval_runner = EnvRunner(self.config, worker_index=10_000)
        self._eval_runner.set_weights(self.learners.get_weights())
        episodes = self._eval_runner.evaluate(n, explore=cfg.evaluation_explore)
        out = {
            "evaluation/episode_return_mean": float(np.mean([e["return"] for e in episodes])),
            "evaluation/episode_len_mean": float(np.mean([e["length"] for e in episodes])),
            "evaluation/episodes": len(episodes),
        }
        for pid in self.policy_specs:
            values = [e["policy_returns"][pid] for e in episodes if pid in e["policy_returns"]]
            out[f"evaluation/policy_return_mean/{pid}"] = float(np.mean(values)) if values else math.nan
        return out

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
    def save(self, path: str | os.PathLike) -> str:
        """Writes a checkpoint directory atomically (temp dir + rename): weights as safetensors, no pickled code."""
        import torch
        from safetensors.numpy import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
        weights = self.learners.get_weights()
        for pid, state in weights["modules"].items():
            save_file({k: np.ascontiguousarray(v) for k, v in state.items()}, str(tmp / f"policy_{pid}.safetensors"))
        torch.save(self.learners.get_optimizer_state(), tmp / "optimizers.pt")
        manifest = {
            "schema_version": CHECKPOINT_SCHEMA,
            "marl_version": _version(),
            "algo": self.config.algo_name,
            "config": self.config.to_dict(),
            "iteration": self.iteration,
            "weights_version": weights["version"],
            "counters": dict(self.metrics.counters),
            "policies": list(weights["modules"]),
            "connectors": {pid: {k: np.asarray(v).tolist() for k, v in s.items()} for pid, s in weights["connectors"].items()},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        return str(path)

    def restore(self, path: str | os.PathLike) -> None:
        import torch
        from safetensors.numpy import load_file

        path = Path(path)
        manifest = read_manifest(path)
        modules = {pid: load_file(str(path / f"policy_{pid}.safetensors")) for pid in manifest["policies"]}
        connectors = {pid: {k: (float(v) if k == "count" else np.asarray(v)) for k, v in s.items()} for pid, s in manifest["connectors"].items()}
        self.learners.set_weights({"version": manifest["weights_version"], "modules": modules, "connectors": connectors})
        self.learners.set_optimizer_state(torch.load(path / "optimizers.pt", weights_only=True))
        self.metrics.counters.clear()
        self.metrics.counters.update(manifest["counters"])
        self.iteration = manifest["iteration"]
        self._sync_runners()

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike) -> "Algorithm":
        from marl.algorithms.scenario import config_from_dict

        manifest = read_manifest(Path(path))
        data = dict(manifest["config"])
        if data.get("multi_agent", {}).get("policy_mapping") and str(data["multi_agent"]["policy_mapping"]).startswith("<callable"):
            raise ValueError(
                "this checkpoint's policy mapping is a Python callable; build the config in Python and call algo.restore(path)"
            )
        algo = config_from_dict(data, where=f"checkpoint {path}").build()
        algo.restore(path)
        return algo

    def stop(self) -> None:
        self.runners.stop()
        self.learners.stop()
        if self._eval_runner is not None:
            self._eval_runner.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def read_manifest(path: Path) -> dict:
    file = path / "manifest.json"
    if not file.is_file():
        raise FileNotFoundError(f"'{path}' is not a marl checkpoint (no manifest.json)")
    manifest = json.loads(file.read_text())
    if manifest.get("schema_version") != CHECKPOINT_SCHEMA:
        raise ValueError(
            f"checkpoint '{path}' has schema version {manifest.get('schema_version')}; this marl reads version {CHECKPOINT_SCHEMA}"
        )
    return manifest


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("marl")
    except Exception:
        return "0+unknown"
