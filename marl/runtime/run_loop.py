"""One training run into a run directory: what `marl train` does.

    run_dir/
      config.yaml      the resolved config (every key, defaults filled in)
      result.jsonl     one result dict per iteration
      progress.csv     the same, one row per iteration
      events.out.tfevents.*   TensorBoard scalars (step = env steps)
      checkpoint/      the latest checkpoint: every `checkpointing.checkpoint_frequency`
                       iterations and when the run stops
      cluster.json     the Ray nodes of the env runners (runs with num_env_runners > 0)

`resume_training` continues such a directory from its checkpoint: weights,
optimiser state, counters and iteration come back through `Algorithm.restore`.
The run loop owns the stop criteria (`stop_reason`, the config's `stop` section).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Callable

from marl.config.sections import stop_reason
from marl.errors import ConfigError
from marl.logging.progress import progress_line
from marl.logging.run_dir import CHECKPOINT_DIR, CONFIG_FILE, RunLogger
from marl.config.compose import load_scenario
from marl.execution import metrics as m


def config_for_resume(run_dir: str | os.PathLike, overrides: list[str] | None = None):
    """The config a run directory was trained with (its config.yaml), plus `key=value` overrides."""

    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE).is_file():
        raise ConfigError(f"cannot resume '{run_dir}': it is not a run directory (no {CONFIG_FILE})")
    config = load_scenario(run_dir / CONFIG_FILE, overrides)
    # (a PSRO run resumes from its population/, which marl.population.psro_run checks)
    if config.psro_cfg is None and not (run_dir / CHECKPOINT_DIR / "manifest.json").is_file():
        raise ConfigError(f"cannot resume '{run_dir}': it has no {CHECKPOINT_DIR}/ yet (set checkpointing.checkpoint_frequency)")
    mapping = config.multi_agent_cfg.policy_mapping
    if isinstance(mapping, str) and mapping.startswith("<callable"):
        raise ConfigError(
            f"cannot resume '{run_dir}' from the command line: its policy mapping was a Python callable; "
            "build the config in Python and call algo.restore(run_dir / 'checkpoint')"
        )
    return config


def train_run(
    config,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    echo: Callable[[str], None] | None = print,
    progress: Callable[[dict], None] | None = None,
    final_evaluation: int = 0,
) -> str:
    """Trains `config` until a stop criterion (or Ctrl-C), logging into `run_dir`; returns why it stopped.

    With `resume`, weights, optimiser state, counters and iteration come from
    `run_dir/checkpoint` first. `echo` receives messages and, unless `progress` is
    given, one progress line per iteration (None: silent); `progress` receives each
    iteration's result instead (a live display, Ray Tune's `report`).
    `final_evaluation`: episodes of greedy evaluation added to the last iteration's
    result when a stop criterion ends the run (`marl experiment` scores runs by it).
    """
    say = echo or (lambda line: None)
    show = progress or (lambda result: say(progress_line(result, config.stop_cfg)))
    run_dir = Path(run_dir)
    algo = config.build()
    logger = None
    status = "failed"
    ending = "training failed"  # what operators facing the outside (the policy server) tell why the run ended
    try:
        resume_from = None
        if resume:
            algo.restore(run_dir / CHECKPOINT_DIR)
            resume_from = {"iteration": algo.iteration, "env_steps_total": algo.metrics.counters.get(m.ENV_STEPS_SAMPLED, 0)}
            say(f"resumed from {run_dir / CHECKPOINT_DIR} at iteration {algo.iteration}, {resume_from['env_steps_total']} env steps")
        logger = RunLogger(run_dir, algo.config.to_dict(), resume_from=resume_from)  # as built: `auto` keys resolved
        _record_cluster(algo, run_dir, say)
        stop_cfg, ckpt_cfg = config.stop_cfg, config.checkpointing_cfg
        reason = None
        mid_iteration = False
        try:
            with _FinishIterationOnInterrupt(say) as interrupt:
                while reason is None:
                    mid_iteration = True
                    result = algo.train()
                    reason = stop_reason(stop_cfg, result)
                    if reason is not None and final_evaluation:
                        result.update(algo.evaluate(final_evaluation, unit="episodes"))
                    logger.log(result)
                    mid_iteration = False
                    show(result)
                    if reason is None and ckpt_cfg.checkpoint_frequency and algo.iteration % ckpt_cfg.checkpoint_frequency == 0:
                        algo.save(run_dir / CHECKPOINT_DIR)
                    if interrupt.requested and reason is None:
                        raise KeyboardInterrupt
        except KeyboardInterrupt:
            if mid_iteration:  # a second Ctrl-C stopped an iteration halfway: its state is not one to resume from
                say(f"interrupted mid-iteration; the checkpoint in {run_dir / CHECKPOINT_DIR}, if any, is from an earlier one")
            elif ckpt_cfg.checkpoint_at_end and algo.iteration:
                algo.save(run_dir / CHECKPOINT_DIR)
                say(f"interrupted; checkpoint: {run_dir / CHECKPOINT_DIR} (continue with --resume {run_dir})")
            status = "interrupted"
            ending = "training was interrupted"
            raise
        if ckpt_cfg.checkpoint_at_end:
            algo.save(run_dir / CHECKPOINT_DIR)
            logger.log_checkpoint(run_dir / CHECKPOINT_DIR)
        status = "finished"
        ending = f"stop criterion met: {reason}"
        say(f"stopped: {reason}" + (f"; checkpoint: {run_dir / CHECKPOINT_DIR}" if ckpt_cfg.checkpoint_at_end else ""))
        return reason
    finally:
        if logger is not None:
            logger.close(status)
        algo.stop(reason=ending)


class _FinishIterationOnInterrupt:
    """The first Ctrl-C lets the iteration in progress finish (its result row, counters and checkpoint then
    agree, so a resumed run repeats nothing and loses nothing); a second one stops at once. Only the main
    thread can own SIGINT: elsewhere (Ray Tune's trial threads) Ctrl-C keeps its default behaviour."""

    def __init__(self, say):
        self.say = say
        self.requested = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def _on_sigint(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.say("interrupt: finishing the current iteration, then a checkpoint (Ctrl-C again to stop at once)")

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def _record_cluster(algo, run_dir: Path, say) -> None:
    """Writes cluster.json: which Ray nodes the driver and the env runners run on."""
    if algo.runners.is_local:
        return
    import ray

    nodes = algo.runners.node_ids()
    info = {
        "ray_address": os.environ.get("RAY_ADDRESS") or "local",
        "driver_node": ray.get_runtime_context().get_node_id(),
        "env_runner_nodes": nodes,
        "cluster_nodes": sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive")),
    }
    (run_dir / "cluster.json").write_text(json.dumps(info, indent=1))
    say(f"env runners: {len(nodes)} on {len(set(nodes))} node(s) of {len(info['cluster_nodes'])}")
