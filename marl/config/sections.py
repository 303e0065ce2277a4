"""The config sections shared by every algorithm: typed, documented, validated.

Each section is a dataclass; each field's `doc` metadata is the reference for
the YAML key of the same name. The checks a `doc(...)` may carry, and `update_section`,
the one place a key/value is checked, are in `marl.config.checks`; `plain_data` (a config
value as config.yaml writes it) is in `marl.config.plain_data`.
The stop rule (`stop_reason`) is here, beside the section it reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from marl.config.checks import AUTO, device_problem, doc, schedule_of_factors


@dataclass
class EnvironmentSection:
    env: str | None = doc(
        "Gymnasium id (module-qualified to import its registering module: lbforaging:Foraging-8x8-2p-2f-v3), "
        "PettingZoo module path (mpe2.simple_spread_v3), vmas.<scenario> (vmas.balance) or registered name", None,
    )
    env_config: dict = doc("keyword arguments for the env's constructor (VMAS: scenario kwargs, plus max_steps, "
                           "continuous_actions, device)", default_factory=dict)
    wrappers: list = doc(
        "SuperSuit wrappers applied to the env before marl adapts it, innermost first: a list of names or "
        "{name: {arg: value}} (e.g. [{color_reduction_v0: {mode: B}}, {resize_v1: {x_size: 32, y_size: 32}}]); "
        "auto: frames with a side over 84 px (uint8, HWC: Pistonball's 457x120 crops, Atari's 210x160) are resized "
        "to 42x42, colour and uint8 kept, and the default modules' conv stack is sized to that; other envs get none "
        "(marl.envs.wrappers; config.yaml names what auto chose); a list given, even [], replaces auto whole",
        AUTO, auto=True,
    )
    clip_actions: bool = doc("clip Box actions to the action space's bounds", True)
    unsquash_actions: bool = doc(
        "module acts in [-1, 1]; rescale Box actions to the bounds (the actors of SAC, TD3, MASAC, MADDPG and "
        "continuous CQL always act in [-1, 1]: their policies' actions are rescaled whatever this says)", False)


@dataclass
class EnvRunnersSection:
    num_env_runners: int = doc("remote EnvRunner actors; 0 samples in-process", 0, min=0)
    num_envs_per_env_runner: int = doc("env copies stepped in lockstep by each runner", 8, min=1)
    rollout_fragment_length: int = doc(
        "env steps per env copy in one sample() call; with many agents, algorithms whose train_batch_size counts agent "
        "steps take fewer, so one call brings at most its share of a train batch (or as many rows as a single-agent env)",
        128, min=1,
    )
    batch_mode: str = doc(
        "truncate_episodes: a fragment is rollout_fragment_length steps, open episodes are cut and bootstrapped; "
        "complete_episodes: after those steps each env copy plays its episode to the end, so no episode is cut "
        "(turn-based games: the loser's last reward lands in the same fragment)",
        "truncate_episodes", choices=("truncate_episodes", "complete_episodes"),
    )
    num_cpus_per_env_runner: float = doc("CPUs Ray reserves for each runner actor", 1.0, min=0)
    observation_filter: str = doc("observation normalisation: none | mean_std", "none", choices=("none", "mean_std"))
    max_runner_restarts: int = doc("runner crashes tolerated before the run stops", 100, min=0)
    resource_wait_s: float = doc(
        "seconds a run joined to a cluster (RAY_ADDRESS) waits for it to provide the CPUs its runners and learners "
        "ask for (an autoscaling cluster adds nodes) before it fails; a local Ray short of CPUs fails at once",
        300.0, min=0,
    )
    overlap: bool = doc(
        "sample the next round on the runner actors while the learner trains on this one (the default graph's "
        "sample node runs mode=overlap): one round of policy lag, which PPO/MAPPO/A2C/PG correct with the ratio to "
        "the behaviour policy's recorded log-probs; needs num_env_runners >= 1 (1: one sampling process beside the "
        "learner); the round size is overlap_round's; false: strictly synchronous sampling (the default)",
        False,
    )
    overlap_round: str = doc(
        "with overlap, for algorithms whose train_batch_size counts agent steps (PPO, MAPPO, A2C, PG): half_batch: "
        "a round brings at most half a train batch (the fragment is shortened by the env's agent count and the "
        "runners), so only the first half of each batch lags the learner by one update and learning per env step "
        "stays where synchronous sampling has it (CartPole PPO: 22.5k env steps to 450, as sync; whole-batch rounds "
        "28.7k); fragment: rounds of rollout_fragment_length as given (a whole batch lags one update)",
        "half_batch", choices=("half_batch", "fragment"),
    )
    numpy_acting: bool = doc(
        "runners act through a module's NumPy copy of its acting pass where it offers one (the default MLP and "
        "MAPPO modules on flat observations, `RLModule.numpy_actor`): the same numbers and random draws without a "
        "torch call per env step (7 % more env steps/s on simple_spread with 4 envs per runner); false: always the "
        "torch passes",
        True,
    )
    batched: bool | str = doc(
        "which runner steps the env: auto: the batched path (BatchedEnvRunner: tensors [worlds, agents, ...], one "
        "forward pass per policy per step, no Python loop over worlds or agents) for envs that simulate many worlds "
        "at once (vmas.*, jaxmarl.*), the dict path otherwise and for what the batched path does not run (stateful "
        "modules, env->module connector pieces, self-play pools, complete_episodes); true: the batched path, also "
        "for a Gymnasium id (its Gymnasium vector env), failing with the reason where it cannot; false: the dict path",
        "auto", choices=("auto", True, False),
    )
    compiled_rollout: bool | str = doc(
        "the batched path on a JaxMARL env (jaxmarl.*): sample each fragment with ONE jitted call, a jax.lax.scan "
        "over its steps of the env's step, the policies' passes in jax.numpy from the modules' current weights and "
        "the draws from a JAX key (marl.runners.jax_rollout); auto: where every acting policy's module offers a "
        "plain acting pass on its observations (the default MLP: Linear layers and known activations, Categorical "
        "or state-independent Gaussian head) and its algorithm records no next observations or global state (PPO, "
        "A2C, APPO, IMPALA), the agents are alike in spaces and env_runners.device is cpu; "
        "true: fail with the reason where it cannot; false: one env call and one acting pass per step. Greedy "
        "acting and frozen policies always step one call at a time",
        "auto", choices=("auto", True, False),
    )
    device: str = doc(
        "torch device the batched path's env (where it is a torch or JAX simulator), policy and fragment live on: "
        "cpu, cuda, cuda:1, ...; the dict path always acts on the CPU",
        "cpu", check=lambda v: device_problem(v),
    )


@dataclass
class MultiAgentSection:
    policies: dict = doc(
        "policy id -> spec {module_class, model}; empty: one 'default_policy' for every agent, or where agents differ "
        "in their spaces one policy per group of alike agents (adversary_0, adversary_1 -> 'adversary'; config.yaml "
        "records them)", default_factory=dict)
    policy_mapping: Any = doc("glob-pattern table agent -> policy (first match wins) or a callable (agent_id, episode)", None)
    policies_to_train: list | None = doc("policies the learner updates; null: all", None)
    self_play: dict | None = doc(
        "train `policy` against a pool of its frozen snapshots: {policy, pool_size, snapshot_every (learner updates), "
        "elo_k, evaluation_opponent ('random' or an RLModule class path: evaluation plays it instead of the pool)}; "
        "adds the pool's policies and, unless given, the mapping and policies_to_train", None,
    )
    league: dict | None = doc(
        "AlphaStar-style league around `policy` (marl.policies.league): {policy, main_agents, main_exploiters, "
        "league_exploiters, max_snapshots, snapshot_win_rate, min_games, snapshot_every (learner updates), snapshot_against (league, previous: the games the win rate counts), "
        "self_play, random_share (main agents' games against "
        "a permanent random member), main_share, "
        "pfsp (squared, variance, linear, uniform), elo_k, rating_games (games between each new snapshot and its member's "
        "previous one, rated), evaluation_opponent}; adds the members' policies and, "
        "unless given, the mapping and policies_to_train", None,
    )


@dataclass
class LearnersSection:
    num_learners: int = doc(
        "learner actors; 0 learns in-process; N > 1 data-parallel (DDP, gradients averaged; "
        "minibatch_size counts the rows of all N together)",
        0,
        min=0,
    )
    num_cpus_per_learner: float = doc("CPUs Ray reserves for each learner actor", 1.0, min=0)
    num_threads: int | None = doc(
        "torch threads in the learner's updates; null: the cores the learner owns (an in-process learner: the "
        "process's cores, at most OMP_NUM_THREADS, less those of the run's runner actors; a learner actor: its "
        "num_cpus_per_learner), said "
        "in the run's first lines; set 1 where other jobs share the machine (threads wait on each other, so a "
        "busy core slows every update; docs/batched.md)", None, min=1)
    lr_multiplier: list | None = doc(
        "piecewise-linear [[env_step, factor], ...] over the run's sampled env steps (an offline run's: trained), "
        "held past its ends, multiplying every parameter group's learning rate at each update: [[0, 1.0], "
        "[1000000, 0.0]] anneals linearly to 0 by 1M (JaxMARL's ANNEAL_LR; RLlib's lr schedules); null: constant",
        None, check=schedule_of_factors,
    )
    num_gpus_per_learner: float = doc(
        "GPUs of each learner (0: the CPU); > 0: modules and optimisers on CUDA, each update's batch moved there once "
        "(pinned memory), env runners stay on the CPU; with num_learners > 1 gradients are averaged over NCCL; "
        "a ConfigError where torch cannot use CUDA",
        0.0, min=0,
    )
    compile_loss: bool = doc(
        "compile each trainable parameter group's loss (the module's training pass and the loss; autograd runs the "
        "compiled backward) with torch.compile (marl/learners/compiled.py): on one CPU thread, PPO's and MAPPO's "
        "simple_spread minibatch steps 1.36-1.38x faster at 1,536 rows ([64, 64] tanh: 3.0 -> 2.2 ms) and 1.24-1.26x "
        "at 8,192 (benchmarks/speed/learner_compile.py), for 13-19 s of compilation in the first update (4 s with "
        "inductor's cache warm) and 6-10 s more at the first new minibatch row count (then the row count is "
        "dynamic: no more recompiles). It pays back after about 25k minibatch steps (7k with the cache warm: 3M and "
        "0.9M env steps at JaxMARL's 16x128), so it is off by default: tests and short runs would only pay the "
        "compilation. Updates equal the "
        "eager ones to float rounding, not bit for bit: resume a run with its own setting. Where compiling fails the "
        "run warns in one line and runs the eager loss; each update's loss_compiled stat says which ran",
        False,
    )


@dataclass
class DebuggingSection:
    seed: int | None = doc("base seed; each runner and env copy derives its own", None, min=0)
    log_level: str = doc("python logging level", "WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    validate_env: bool = doc("check every env reset/step against the multi-agent env contract (agents, spaces, flags)", False)
    check_module_state: bool = doc("on the first update, check that a stateful (recurrent) module's training pass over sequences reproduces its acting pass (log-probs), and stop with a clear error if not", True)


@dataclass
class EvaluationSection:
    evaluation_interval: int | None = doc("evaluate every N iterations; null: never during training", None, min=1)
    evaluation_duration: int = doc("length of one evaluation, in evaluation_duration_unit", 10, min=1)
    evaluation_duration_unit: str = doc("episodes | env_steps", "episodes", choices=("episodes", "env_steps"))
    evaluation_num_env_runners: int = doc("remote evaluation runners; 0 evaluates in-process", 0, min=0)
    evaluation_explore: bool = doc("sample actions during evaluation instead of acting greedily", False)
    evaluation_config: dict = doc(
        "overrides for the evaluation runners, by section: {environment: {env_config: {...}}, env_runners: {...}}",
        default_factory=dict,
    )
    evaluation_parallel_to_training: bool = doc(
        "evaluate on the remote evaluation runners while the iteration trains (weights of the previous iteration)", False
    )


@dataclass
class ConnectorsSection:
    env_to_module: list = doc(
        "pieces run on each policy's observations every env step, after flattening (and env_runners.observation_filter), "
        "in order: [{name: frame_stack, k: 4}, {name: prev_action_reward}]; built-in: mean_std, frame_stack, "
        "prev_action_reward; or an import path 'pkg.mod:Class' (a marl.connectors.ConnectorPiece)",
        default_factory=list,
    )
    module_to_env: list = doc(
        "pieces run on each policy's sampled actions before they reach the env (then environment.clip_actions / "
        "unsquash_actions); built-in: clip_actions, unsquash_actions",
        default_factory=list,
    )
    learner: list = doc(
        "pieces run on each policy's train batch before the algorithm's own (GAE): [{name: reward_scale, scale: 0.1}]; "
        "built-in: reward_scale, reward_clip, gae, standardize_advantages",
        default_factory=list,
    )
    policies: dict = doc(
        "per-policy pipelines {policy_id: {env_to_module: [...], module_to_env: [...], learner: [...]}}: a list given "
        "here replaces the one above for that policy", default_factory=dict,
    )


@dataclass
class OfflineSection:
    output: str | None = doc(
        "record every sampled batch here as Parquet, one folder per policy (docs/offline_format.md); "
        "a `record` node follows each `sample` node of the workflow", None,
    )
    output_max_file_mb: float = doc("a recorded file is closed and published once it reaches this size", 64.0, min=0.001)
    output_compression: str = doc("Parquet compression of recorded files", "zstd", choices=("zstd", "snappy", "gzip", "none"))
    input: Any = doc(
        "offline algorithms (BC, MARWIL, CQL) train from these recorded files, read with Ray Data: a folder, "
        "a glob or a list of them; rows go to policies by multi_agent.policy_mapping", None,
    )
    shuffle: str = doc(
        "rows: shuffle file order and rows within a buffer; files: file order only (keeps each agent's pieces "
        "contiguous, as MARWIL's returns need); none", "rows", choices=("rows", "files", "none"),
    )
    shuffle_buffer_rows: int = doc("rows the local shuffle buffer holds (memory bound of shuffling)", 50_000, min=1)
    cache_mb: float = doc(
        "input no larger than this on disk is streamed once and kept in memory for later epochs; "
        "larger input streams through Ray Data every epoch (flat memory)", 256.0, min=0,
    )


@dataclass
class StopSection:
    episode_return_mean: float | None = doc("stop once the iteration's mean episode return reaches this", None)
    episode_return_window: int = doc(
        "episodes episode_return_mean is judged over: 0, those that finished in the iteration; N, the last N that finished, "
        "across iterations (RLlib's metrics_num_episodes_for_smoothing, 100 by default; result key episode_return_window_mean)",
        0, min=0,
    )
    env_steps_total: int | None = doc("stop after this many env steps", None, min=1)
    time_total_s: float | None = doc("stop after this many seconds of training", None, min=0)
    iterations: int | None = doc("stop after this many iterations", None, min=1)


def stop_reason(stop_cfg, result: dict) -> str | None:
    """The stop rule: which criterion of a `stop` section an iteration's result meets, if any (the first, in this order)."""
    ret = result.get("episode_return_window_mean" if stop_cfg.episode_return_window else "episode_return_mean", math.nan)
    if stop_cfg.episode_return_mean is not None and not math.isnan(ret) and ret >= stop_cfg.episode_return_mean:
        window = f" (last {stop_cfg.episode_return_window} episodes)" if stop_cfg.episode_return_window else ""
        return f"episode_return_mean{window} {ret:.2f} >= {stop_cfg.episode_return_mean}"
    if stop_cfg.env_steps_total is not None and result["env_steps_total"] >= stop_cfg.env_steps_total:
        return f"env_steps_total {result['env_steps_total']} >= {stop_cfg.env_steps_total}"
    if stop_cfg.time_total_s is not None and result["time_total_s"] >= stop_cfg.time_total_s:
        return f"time_total_s {result['time_total_s']:.1f} >= {stop_cfg.time_total_s}"
    if stop_cfg.iterations is not None and result["iteration"] >= stop_cfg.iterations:
        return f"iterations {result['iteration']} >= {stop_cfg.iterations}"
    return None


@dataclass
class CheckpointingSection:
    checkpoint_frequency: int = doc(
        "`marl train`: write the run's checkpoint/ every N iterations (0: only at the end); `--resume` starts from it",
        10,
        min=0,
    )
    checkpoint_every_s: float = doc(
        "`marl train`: also write checkpoint/ after the first iteration that ends this many seconds after the last "
        "checkpoint (0: off), so a run killed without warning loses at most this much work besides its iteration "
        "in flight", 300.0, min=0,
    )
    checkpoint_at_end: bool = doc(
        "`marl train`: write checkpoint/ when the run stops: a stop criterion, or SIGINT/SIGTERM (Ctrl-C, `ray job "
        "stop`, a scheduler's preemption), which first let the iteration in flight finish", True,
    )
    storage: str | None = doc(
        "`marl train` without --output: where run directories go, a folder or a filesystem URI (file://, s3://, "
        "gs://, memory://: fsspec's, as Ray Train's storage_path); a URI's run is staged locally and uploaded after "
        "each checkpoint and when it stops. null: $MARL_RUNS_DIR, else ./runs", None,
    )


@dataclass
class LoggersSection:
    tensorboard: bool = doc("write TensorBoard event files into the run directory (step = env steps)", True)
    csv: bool = doc("write progress.csv (result.jsonl is always written: `--resume` and `marl report` read it)", True)
    mlflow: bool = doc(
        "log to MLflow (pip install 'marl[mlflow]'): the resolved config as params and config.yaml, every metric "
        "with env steps as the step, the final checkpoint as artifacts", False,
    )
    mlflow_tracking_uri: str | None = doc(
        "MLflow tracking server (http://host:5000) or store URI (sqlite:///path.db); null: $MLFLOW_TRACKING_URI, else "
        "a local store in the run directory, RUN_DIR/mlflow.db with RUN_DIR/mlartifacts "
        "(`mlflow ui --backend-store-uri sqlite:///RUN_DIR/mlflow.db`)", None,
    )
    mlflow_experiment: str = doc("MLflow experiment the run is logged under", "marl")
    wandb: bool = doc(
        "log to Weights & Biases (pip install 'marl[wandb]'): the resolved config, every metric against "
        "env_steps_total, the final checkpoint as a model artifact", False,
    )
    wandb_project: str = doc("W&B project", "marl")
    wandb_entity: str | None = doc("W&B entity (user or team); null: your default entity", None)
    wandb_group: str | None = doc("W&B group (`marl experiment` sets the suite's name)", None)
    wandb_mode: str = doc(
        "online: stream to the W&B server; offline: write RUN_DIR/wandb only (no network; upload later with "
        "`wandb sync`)", "online", choices=("online", "offline"),
    )
    log_checkpoint: bool = doc("upload the final checkpoint as an artifact (MLflow, W&B)", True)


# The sections of an algorithm's config, in the order config.yaml writes them (`training`: each algorithm's own).
SECTION_NAMES = (
    "environment", "env_runners", "multi_agent", "training", "learners", "debugging", "evaluation", "stop", "checkpointing",
    "connectors", "loggers", "offline",
)
