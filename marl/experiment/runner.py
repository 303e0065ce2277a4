"""`marl experiment SUITE.yaml`: every run of a suite, as Ray Tune trials or in-process, resumable.

    RUNS_DIR/
      suite.yaml                         the suite as loaded (what `marl report` reads)
      <task>/<algorithm>/seed_<n>/       one marl run directory per run (config.yaml, result.jsonl, checkpoint/, ...)
          run.json                       task, algorithm, seed, env, budget
          done.json                      written when the run reached its budget: it is never run again

Each run trains under an exclusive lock (`seed_<n>.lock` beside its directory): a second process on the same
runs directory (another `marl experiment`, a Tune trial of another job) skips a run the first is training rather
than wiping or resuming it under it.

Re-running the same command skips finished runs (done.json), resumes interrupted ones from
their checkpoint/ (`marl train --resume` semantics: rows past the checkpoint are dropped and
trained again) and starts the others. With a larger `env_steps`, finished runs continue from
their checkpoints up to the new budget. On a cluster (`ray job submit ... -- marl experiment ...`)
RUNS_DIR must be on a filesystem every node sees: trials write their run directories wherever
Tune places them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from omegaconf import OmegaConf

from marl.execution.ray_init import start_local_ray
from marl.experiment.suite import RunSpec, Suite, import_suite_modules
from marl.execution.user_code import import_user_modules, module_folders
from marl.logging.run_dir import CHECKPOINT_DIR, RESULT_FILE
from marl.runtime.run_loop import config_for_resume, train_run
import torch

RUN_FILE = "run.json"
DONE_FILE = "done.json"
SUITE_FILE = "suite.yaml"


class RunInUse(RuntimeError):
    """Another process is training this run (it holds the run's lock)."""


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Holds `run_dir`'s exclusive lock (a file beside it: the directory itself may be wiped and made again), or
    raises RunInUse naming the process that holds it. An flock: released when its holder exits, however it exits."""
    lock_path = run_dir.parent / f"{run_dir.name}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            raise RunInUse(f"{run_dir} is being trained by another process (pid {holder}; lock {lock_path})") from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        yield


def run_in_use(run_dir: Path) -> bool:
    """Whether another process holds `run_dir`'s lock now."""
    try:
        with run_lock(run_dir):
            return False
    except RunInUse:
        return True


def run_state(run_dir: Path, budget: int) -> str:
    """done (reached `budget`, or its `targets:` return), resume (has a checkpoint), or fresh."""
    done = run_dir / DONE_FILE
    if done.is_file():
        record = json.loads(done.read_text())
        if record.get("env_steps_total", 0) >= budget or record.get("target_reached"):
            return "done"
    if (run_dir / CHECKPOINT_DIR / "manifest.json").is_file():
        return "resume"
    return "fresh"


def budget_stop(spec: RunSpec):
    """A `stop` section of the run's budget and its `targets:` return (what the display measures progress against)."""
    window = spec.config().stop_cfg.episode_return_window if spec.target is not None else 0
    return SimpleNamespace(episode_return_mean=spec.target, episode_return_window=window, env_steps_total=spec.budget,
                           time_total_s=None, iterations=None)


def run_one(spec: RunSpec, runs_dir: Path, budget: int, episodes: int, family: str, *,
            echo: Callable[[str], None] | None = None, progress: Callable[[dict], None] | None = None) -> dict:
    """Trains one run of a suite to `budget` env steps (resuming it when it has a checkpoint); returns done.json."""

    run_dir = Path(runs_dir) / spec.relative_dir
    with run_lock(run_dir):
        return _train_locked(spec, run_dir, budget, episodes, family, echo, progress)


def _train_locked(spec: RunSpec, run_dir: Path, budget: int, episodes: int, family: str, echo, progress) -> dict:
    state = run_state(run_dir, budget)
    if state == "done":
        return json.loads((run_dir / DONE_FILE).read_text())
    if state == "fresh" and run_dir.exists():
        shutil.rmtree(run_dir)  # started but interrupted before its first checkpoint: its rows are trained again
    run_dir.mkdir(parents=True, exist_ok=True)
    if state == "resume":
        (run_dir / DONE_FILE).unlink(missing_ok=True)
        config = config_for_resume(run_dir, [f"stop.env_steps_total={budget}"])
    else:
        config = spec.config()
        (run_dir / RUN_FILE).write_text(json.dumps({
            "task": spec.task, "algorithm": spec.algorithm, "algo": config.algo_name, "seed": spec.seed,
            "env": config.environment_cfg.env, "family": family,
        }, indent=1))
    started = time.time()
    reason = train_run(config, run_dir, resume=state == "resume", echo=echo, progress=progress, final_evaluation=episodes)
    last = json.loads((run_dir / RESULT_FILE).read_text().splitlines()[-1])
    done = {"reason": reason, "env_steps_total": last["env_steps_total"], "iterations": last["iteration"],
            "time_s": round(time.time() - started, 2), "resumed": state == "resume",
            "target_reached": spec.target is not None and str(reason).startswith("episode_return_mean")}  # (its stop_reason)
    (run_dir / DONE_FILE).write_text(json.dumps(done, indent=1))
    return done


def _save_suite(suite: Suite, runs_dir: Path) -> None:
    runs_dir.mkdir(parents=True, exist_ok=True)
    data = OmegaConf.to_container(OmegaConf.load(suite.path), resolve=False)
    data["name"] = suite.name
    data["env_steps"] = suite.env_steps
    data["seeds"] = suite.seeds
    data["families"] = suite.env_families  # for `marl report` (the marl-eval JSON's environment level)
    (runs_dir / SUITE_FILE).write_text(OmegaConf.to_yaml(OmegaConf.create(data)))


def pending_runs(suite: Suite, runs_dir: Path) -> tuple[list[RunSpec], list[RunSpec]]:
    """(runs still to train, runs already finished)."""
    todo, done = [], []
    for spec in suite.runs:
        (done if run_state(runs_dir / spec.relative_dir, spec.budget) == "done" else todo).append(spec)
    return todo, done


def run_local(suite: Suite, runs_dir: Path, display) -> list[str]:
    """Every pending run in this process, one after the other; returns the failed runs' names."""
    todo, done = pending_runs(suite, runs_dir)
    for spec in done:
        display.finish(spec.name, "skipped (done)")
    failed = []
    for spec in todo:
        display.start(spec.name)
        stop = budget_stop(spec)
        try:
            run_one(spec, runs_dir, spec.budget, suite.evaluation_episodes, suite.env_families[spec.task],
                    echo=None, progress=lambda result, name=spec.name: display.update(name, result, stop))
        except KeyboardInterrupt:
            display.finish(spec.name, "interrupted")
            raise
        except RunInUse as err:  # another process trains it: neither ours to fail nor to touch
            display.finish(spec.name, f"skipped ({err})")
            continue
        except Exception as err:  # one failed run does not stop the suite; it is reported and re-run next time
            display.finish(spec.name, f"failed: {type(err).__name__}: {err}".splitlines()[0])
            failed.append(spec.name)
            continue
        display.finish(spec.name, "finished")
    return failed


def _trial(config: dict) -> None:
    """A Tune trial: one run of the suite (a function trainable; reports every iteration to Tune)."""
    from ray import tune

    torch.set_num_threads(1)  # trials share the machine's cores
    import_suite_modules(Path(config["suite_path"]), [])  # the suite's folder on sys.path
    import_user_modules(config["imports"], "suite 'imports': {module}", config.get("import_folders", []))
    run = config["run"]
    spec = RunSpec(run["task"], run["algorithm"], run["seed"], run["scenario"], tuple(run["overrides"]), run["budget"], run["target"])

    def report(result: dict) -> None:
        tune.report({k: v for k, v in result.items() if isinstance(v, (int, float, str, bool))})

    run_one(spec, Path(config["runs_dir"]), spec.budget, config["episodes"], run["family"], progress=report)


def _resources(num_runners_of: dict):
    from ray.tune.execution.placement_groups import PlacementGroupFactory

    def request(config: dict):
        runners, cpus_per_runner, learners, cpus_per_learner = num_runners_of[config["run"]["name"]]
        return PlacementGroupFactory([{"CPU": 1.0}] + [{"CPU": cpus_per_runner}] * runners + [{"CPU": cpus_per_learner}] * learners)

    return request


def run_tune(suite: Suite, runs_dir: Path, display, max_concurrent: int | None = None) -> list[str]:
    """Every pending run as a Ray Tune trial (Ray started locally, or joined through RAY_ADDRESS)."""
    import ray
    from ray import tune

    todo, done = pending_runs(suite, runs_dir)
    for spec in done:
        display.finish(spec.name, "skipped (done)")
    if not todo:
        return []
    if not ray.is_initialized():
        # A job (`ray job submit`) or --address joins that cluster; otherwise a local instance, whose workers
        # inherit this process's environment. Trials put the suite's folder on sys.path for its `imports`.
        address = os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            start_local_ray(log_to_driver=False, include_dashboard=False)
    resources = {}
    for spec in todo:
        cfg = spec.config()
        resources[spec.name] = (cfg.env_runners_cfg.num_env_runners, cfg.env_runners_cfg.num_cpus_per_env_runner,
                                cfg.learners_cfg.num_learners, cfg.learners_cfg.num_cpus_per_learner)
        display.start(spec.name)
    stops = {spec.name: budget_stop(spec) for spec in todo}

    class Display(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            name = trial.config["run"]["name"]
            display.update(name, result, stops[name])

        def on_trial_complete(self, iteration, trials, trial, **info):
            display.finish(trial.config["run"]["name"], "finished")

        def on_trial_error(self, iteration, trials, trial, **info):
            display.finish(trial.config["run"]["name"], "failed (see its error.txt in Tune's folder)")

    runs = [{"task": s.task, "algorithm": s.algorithm, "seed": s.seed, "scenario": s.scenario,
             "overrides": list(s.overrides), "name": s.name, "family": suite.env_families[s.task],
             "budget": s.budget, "target": s.target} for s in todo]
    param_space = {
        "run": tune.grid_search(runs), "runs_dir": str(runs_dir.resolve()),
        "episodes": suite.evaluation_episodes, "suite_path": str(suite.path.resolve()), "imports": suite.imports,
        "import_folders": module_folders(suite.imports),  # where this process found them (a task's scenario folder, ...)
    }
    trainable = tune.with_resources(_trial, _resources(resources))
    tuner = tune.Tuner(
        trainable, param_space=param_space,
        # one trial process runs one run after another (same resources): no process start and torch import per run
        tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrent, reuse_actors=True),
        run_config=tune.RunConfig(
            name=f"{suite.name}-{time.strftime('%Y%m%d-%H%M%S')}", storage_path=str((runs_dir / "_tune").resolve()),
            verbose=0, callbacks=[Display()], failure_config=tune.FailureConfig(max_failures=0),
        ),
    )
    grid = tuner.fit()
    return [r.config["run"]["name"] for r in grid if r.error is not None]
