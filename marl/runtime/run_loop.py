"""One training run into a run directory: what `marl train` does.

    run_dir/
      config.yaml      the resolved config (every key, defaults filled in)
      result.jsonl     one result dict per iteration
      progress.csv     the same, one row per iteration
      events.out.tfevents.*   TensorBoard scalars (step = env steps)
      checkpoint/      the latest checkpoint: every `checkpointing.checkpoint_frequency`
                       iterations or `checkpoint_every_s` seconds, and when the run stops
                       (SIGINT/SIGTERM: after the iteration in flight)
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
import time
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


class RunInterrupted(KeyboardInterrupt):
    """A run that SIGINT or SIGTERM stopped between two iterations, after writing its checkpoint: `str(err)` is
    the one line saying where it is and how to continue (`marl train` prints it and exits 0). A KeyboardInterrupt,
    so callers that stop on Ctrl-C (a suite's runs) stop on it too."""


def train_run(
    config,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    echo: Callable[[str], None] | None = print,
    progress: Callable[[dict], None] | None = None,
    final_evaluation: int = 0,
    storage=None,
) -> str:
    """Trains `config` until a stop criterion, logging into `run_dir`; returns why it stopped.

    SIGINT or SIGTERM (Ctrl-C, `ray job stop`, a scheduler's preemption) lets the iteration in flight finish,
    writes the checkpoint and raises `RunInterrupted`; a second one stops at once (KeyboardInterrupt).
    With `resume`, weights, optimiser state, counters and iteration come from
    `run_dir/checkpoint` first. `echo` receives messages and, unless `progress` is
    given, one progress line per iteration (None: silent); `progress` receives each
    iteration's result instead (a live display, Ray Tune's `report`).
    `final_evaluation`: episodes of greedy evaluation added to the last iteration's
    result when a stop criterion ends the run (`marl experiment` scores runs by it).
    `storage` (`marl.logging.storage.RunStorage`): `run_dir` is its staging folder; what changed is uploaded
    after each checkpoint and when the run stops.
    """
    say = echo or (lambda line: None)
    show = progress or (lambda result: say(progress_line(result, config.stop_cfg)))
    run_dir = Path(run_dir)
    checkpoint = run_dir / CHECKPOINT_DIR
    algo = config.build()
    logger = None
    status = "failed"
    ending = "training failed"  # what operators facing the outside (the policy server) tell why the run ended
    try:
        resume_from = None
        if resume:
            algo.restore(checkpoint)
            resume_from = {"iteration": algo.iteration, "env_steps_total": algo.metrics.counters.get(m.ENV_STEPS_SAMPLED, 0)}
            say(f"resumed from {checkpoint} at iteration {algo.iteration}, {resume_from['env_steps_total']} env steps")
        logger = RunLogger(run_dir, algo.config.to_dict(), resume_from=resume_from)  # as built: `auto` keys resolved
        _record_cluster(algo, run_dir, say)
        threads, why = algo.learners.threads
        say(f"learner threads: {threads} ({why})")
        if config.learners_cfg.compile_loss:
            say("learner losses: torch.compile (learners.compile_loss): the first updates compile, seconds to tens "
                "of seconds; each update's loss_compiled says whether they ran compiled (0: eager, after a warning)")
        stop_cfg, ckpt_cfg = config.stop_cfg, config.checkpointing_cfg
        saves = _CheckpointSchedule(ckpt_cfg)
        reason = None
        mid_iteration = False
        try:
            with _FinishIterationOnSignal(say) as interrupt:
                while reason is None and interrupt.signal is None:
                    mid_iteration = True
                    result = algo.train()
                    reason = stop_reason(stop_cfg, result)
                    if reason is not None and final_evaluation:
                        result.update(algo.evaluate(final_evaluation, unit="episodes"))
                    logger.log(result)
                    mid_iteration = False
                    show(result)
                    if reason is None and interrupt.signal is None and saves.due(algo.iteration):
                        algo.save(checkpoint)
                        saves.saved(algo.iteration)
                        if storage is not None:
                            storage.sync()
                if reason is None:  # a signal, between two iterations
                    status, ending = "interrupted", "training was interrupted"
                    home = storage.uri if storage is not None else str(run_dir.resolve())
                    raise RunInterrupted(_interrupted_line(interrupt.signal, algo, saves, ckpt_cfg, run_dir, home))
        except RunInterrupted:
            raise
        except KeyboardInterrupt:  # a second signal stopped an iteration (or the checkpoint after it) halfway
            status, ending = "interrupted", "training was interrupted"
            if mid_iteration:  # its state is not one to resume from
                say(f"interrupted mid-iteration; the checkpoint in {checkpoint}, if any, is from an earlier one")
            raise
        if ckpt_cfg.checkpoint_at_end:
            algo.save(checkpoint)
            logger.log_checkpoint(checkpoint)
        status = "finished"
        ending = f"stop criterion met: {reason}"
        home = f"{storage.uri}/{CHECKPOINT_DIR}" if storage is not None else checkpoint
        say(f"stopped: {reason}" + (f"; checkpoint: {home}" if ckpt_cfg.checkpoint_at_end else ""))
        return reason
    finally:
        if logger is not None:
            logger.close(status)
        algo.stop(reason=ending)
        if storage is not None:
            storage.sync()  # the rows, the final (or the signal's) checkpoint


def _interrupted_line(signal_name: str, algo, saves, ckpt_cfg, run_dir: Path, home: str) -> str:
    """Writes the checkpoint of the iteration just finished (unless it has one); the line saying where it is
    (`home`: the run directory as the user named it, a path or a storage URI)."""
    if not (ckpt_cfg.checkpoint_at_end and algo.iteration):
        kept = f"the checkpoint in {home}/{CHECKPOINT_DIR}, if any, is from an earlier one" if algo.iteration else "nothing to save"
        return f"{signal_name}: stopped after iteration {algo.iteration}; {kept} (checkpointing.checkpoint_at_end is false)"
    if saves.last_iteration != algo.iteration:
        algo.save(run_dir / CHECKPOINT_DIR)
    return (f"{signal_name}: stopped after iteration {algo.iteration}; checkpoint: {home}/{CHECKPOINT_DIR} "
            f"(continue with: marl train --resume {home})")


class _CheckpointSchedule:
    """When the run loop writes checkpoint/: every `checkpoint_frequency` iterations, and after the first
    iteration ending `checkpoint_every_s` seconds after the last save (or the start), whichever comes first."""

    def __init__(self, ckpt_cfg):
        self.every, self.every_s = ckpt_cfg.checkpoint_frequency, ckpt_cfg.checkpoint_every_s
        self.last_time, self.last_iteration = time.monotonic(), None

    def due(self, iteration: int) -> bool:
        by_count = bool(self.every) and iteration % self.every == 0
        return by_count or bool(self.every_s) and time.monotonic() - self.last_time >= self.every_s

    def saved(self, iteration: int) -> None:
        self.last_time, self.last_iteration = time.monotonic(), iteration


class _FinishIterationOnSignal:
    """The first SIGINT or SIGTERM lets the iteration in flight finish (its result row, counters and checkpoint
    then agree, so a resumed run repeats nothing and loses nothing); a second one stops at once. Only the main
    thread can own signals: elsewhere (Ray Tune's trial threads) they keep their behaviour. Installed after
    Ray has started, so it also replaces the handlers Ray sets (sys.exit, and a stack dump for SIGTERM)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, say):
        self.say = say
        self.signal: str | None = None  # the name of the first signal received
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._on_signal) for sig in self.SIGNALS}
        return self

    def _on_signal(self, signum, frame):
        if self.signal is not None:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name
        again = "Ctrl-C" if signum == signal.SIGINT else "a second signal"
        self.say(f"{self.signal}: finishing the current iteration, then a checkpoint ({again} stops at once)")

    def __exit__(self, *exc):
        for sig, previous in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)  # None: a handler set outside Python
        return False


def _record_cluster(algo, run_dir: Path, say) -> None:
    """Writes cluster.json: which Ray nodes the driver and the env runners run on."""
    if algo.runners.is_local:
        return
    import ray

    nodes = algo.runners.node_ids()
    alive = [n for n in ray.nodes() if n.get("Alive")]
    address = {n["NodeID"]: n.get("NodeManagerAddress") for n in alive}  # node id -> its IP (ssh, rsync)
    driver = ray.get_runtime_context().get_node_id()
    info = {
        "ray_address": os.environ.get("RAY_ADDRESS") or "local",
        "driver_node": driver,
        "driver_address": address.get(driver),  # where this run directory is, unless it is on shared storage
        "env_runner_nodes": nodes,
        "env_runner_addresses": [address.get(node) for node in nodes],
        "cluster_nodes": sorted(address),
        "node_addresses": address,
    }
    (run_dir / "cluster.json").write_text(json.dumps(info, indent=1))
    say(f"env runners: {len(nodes)} on {len(set(nodes))} node(s) of {len(info['cluster_nodes'])}")
