"""The RLlib side of benchmarks/peers/compare_rllib.py. Runs in benchmarks/.rllib-venv (see setup_rllib.sh).

    benchmarks/.rllib-venv/bin/python benchmarks/peers/rllib_tasks.py TASK [--seed 0] [--runners 0] [--config matched]

Never imports marl. Prints events (see _events.py) that compare_rllib.py reads.
Tasks (the marl side, marl_tasks.py, runs the same ones):

* ppo_cartpole: PPO on CartPole-v1 until an iteration's mean return reaches 450;
* ppo_spread:   PPO on mpe2 simple_spread_v3 (N=3, 25 cycles, discrete), the 3 agents
                sharing one policy, for a fixed number of env steps;
* dqn_cartpole: DQN on CartPole-v1 until 450 or the time cap.

`--config matched` sets RLlib to the hyperparameters of marl's scenario for the
task (scenarios/cartpole_ppo.yaml, scenarios/simple_spread_ppo.yaml): same
learning rate, batch sizes, epochs, network, GAE, clipping, env copies and
fragment length, no KL penalty (marl has none), separate policy and value
networks; for DQN scenarios/cartpole_dqn.yaml (double Q, dueling, 3-step
targets, uniform replay, the same epsilon schedule, training intensity, target
update period and network). `--config defaults` leaves RLlib's defaults
(except the env and, for simple_spread, the shared policy).

The return is computed by a callback with marl's rule: the mean over the
episodes that finished during the iteration, each episode's return summed over
all agents.
"""

from __future__ import annotations

import argparse
import os
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
from _events import emit, run_loop

emit("started")

import ray  # noqa: E402
from ray.rllib.callbacks.callbacks import RLlibCallback  # noqa: E402

SPREAD_CONFIG = {"N": 3, "max_cycles": 25, "continuous_actions": False}


class IterationReturns(RLlibCallback):
    """Sum and count of finished episodes' returns, reduced (and cleared) once per iteration."""

    def on_episode_end(self, *, episode, prev_episode_chunks=None, metrics_logger=None, **kwargs):
        # An episode that spans several sample() calls arrives as its last chunk plus the earlier ones.
        ret = float(episode.get_return()) + sum(float(c.get_return()) for c in prev_episode_chunks or ())
        metrics_logger.log_value(("bench", "return_sum"), ret, reduce="sum")
        metrics_logger.log_value(("bench", "episodes"), 1, reduce="sum")


def make_spread(_cfg=None):
    from mpe2 import simple_spread_v3
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    return ParallelPettingZooEnv(simple_spread_v3.parallel_env(**SPREAD_CONFIG))


def ppo_config(task: str, runners: int, matched: bool, seed: int):
    from ray.rllib.algorithms.ppo import PPOConfig

    cfg = PPOConfig().env_runners(num_env_runners=runners).debugging(seed=seed).callbacks(IterationReturns)
    if task == "ppo_cartpole":
        cfg.environment("CartPole-v1")
        if matched:  # scenarios/cartpole_ppo.yaml
            cfg.env_runners(num_envs_per_env_runner=8, rollout_fragment_length=256 // max(1, runners))
            cfg.training(
                lr=3e-4, train_batch_size_per_learner=2048, minibatch_size=64, num_epochs=10, gamma=0.99,
                lambda_=0.95, clip_param=0.2, vf_clip_param=10.0, vf_loss_coeff=0.5, entropy_coeff=0.0,
                grad_clip=0.5, use_kl_loss=False,
            )
            cfg.rl_module(model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False})
    else:  # ppo_spread
        from ray.tune.registry import register_env

        register_env("simple_spread_v3", make_spread)
        cfg.environment("simple_spread_v3")
        cfg.multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        if matched:  # scenarios/simple_spread_ppo.yaml
            cfg.env_runners(num_envs_per_env_runner=8, rollout_fragment_length=256)
            cfg.training(
                lr=1e-3, train_batch_size_per_learner=2048, minibatch_size=512, num_epochs=5, gamma=0.99,
                lambda_=0.95, clip_param=0.2, vf_clip_param=10.0, vf_loss_coeff=0.5, entropy_coeff=0.01,
                grad_clip=0.5, use_kl_loss=False,
            )
            cfg.rl_module(model_config={"fcnet_hiddens": [128, 128], "fcnet_activation": "tanh", "vf_share_layers": False})
    return cfg


def dqn_config(runners: int, matched: bool, seed: int):
    from ray.rllib.algorithms.dqn import DQNConfig

    cfg = (
        DQNConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=runners)
        .debugging(seed=seed)
        .callbacks(IterationReturns)
    )
    if matched:  # scenarios/cartpole_dqn.yaml (marl's DQN keys carry RLlib's names)
        cfg.env_runners(num_envs_per_env_runner=4, rollout_fragment_length=16)
        cfg.training(
            lr=1e-3, adam_epsilon=1e-8, gamma=0.99, train_batch_size_per_learner=64, n_step=3, double_q=True,
            dueling=True, td_error_loss_fn="huber", grad_clip=10.0, epsilon=[(0, 1.0), (8000, 0.04)],
            target_network_update_freq=256, tau=1.0, training_intensity=32,
            num_steps_sampled_before_learning_starts=1000,
            replay_buffer_config={"type": "EpisodeReplayBuffer", "capacity": 100_000},
        )
        cfg.reporting(min_sample_timesteps_per_iteration=1000)
        cfg.rl_module(model_config={"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"})
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task", choices=["ppo_cartpole", "ppo_spread", "dqn_cartpole"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runners", type=int, default=0, help="remote env runners (0: sample in the driver)")
    ap.add_argument("--config", choices=["matched", "defaults"], default="matched")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch threads in the driver (RLlib's learner, and its sampling when in-process); default: torch's")
    ap.add_argument("--target-return", type=float, default=None)
    ap.add_argument("--max-env-steps", type=int, default=10**9)
    ap.add_argument("--max-train-s", type=float, default=600.0)
    args = ap.parse_args()

    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    # Same start as marl's: a fresh local Ray, no dashboard (a plain ray.init() can hang on these machines).
    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, args.runners + 1), include_dashboard=False,
             log_to_driver=False)
    if args.task == "dqn_cartpole":
        cfg = dqn_config(args.runners, args.config == "matched", args.seed)
    else:
        cfg = ppo_config(args.task, args.runners, args.config == "matched", args.seed)
    algo = cfg.build_algo()
    emit("built")

    def train():
        result = algo.train()
        runners = result.get("env_runners", {})
        bench = runners.get("bench", {})
        # An iteration in which no episode finished reports NaN (nothing was logged to reduce): zero episodes.
        episodes = bench.get("episodes", 0) or 0
        episodes = 0 if episodes != episodes else int(episodes)
        ret = float(bench["return_sum"]) / episodes if episodes else float("nan")
        steps = result.get("num_env_steps_sampled_lifetime", runners.get("num_env_steps_sampled_lifetime", 0))
        return int(steps), ret, episodes

    try:
        run_loop(train, target_return=args.target_return, max_env_steps=args.max_env_steps, max_train_s=args.max_train_s)
    finally:
        algo.stop()
        ray.shutdown()


if __name__ == "__main__":
    t0 = time.time()
    main()
