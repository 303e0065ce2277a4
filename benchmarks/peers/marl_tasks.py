"""The marl side of benchmarks/peers/compare_rllib.py: one task in a fresh process, printing events.

    .venv/bin/python benchmarks/peers/marl_tasks.py TASK [--seed 0] [--runners 0]

Tasks (the same as rllib_tasks.py runs on RLlib):

* ppo_cartpole: scenarios/cartpole_ppo.yaml until an iteration's mean return reaches 450;
* ppo_spread:   scenarios/simple_spread_ppo.yaml (3 agents, one shared policy) for a fixed
                number of env steps;
* mappo_spread: scenarios/simple_spread_mappo.yaml (the same, with MAPPO's centralised critic);
* mappo_balance: scenarios/vmas_balance_mappo.yaml (VMAS balance, 3 agents, continuous actions;
                one VMAS env of 32 worlds on the batched path, BatchedEnvRunner) for a fixed
                number of env steps;
* ppo_balance:  the same scenario with PPO (one shared policy, no centralised critic or agent id);
* mappo_navigation / ppo_navigation: scenarios/vmas_navigation_mappo.yaml (VMAS navigation,
                4 agents, continuous actions, 32 worlds), with MAPPO / with PPO as above;
* dqn_cartpole: marl's DQN on CartPole-v1 (scenarios/cartpole_dqn.yaml when it exists, else
                DQNConfig's defaults) until 450 or the time cap. Emits `unavailable` when
                marl has no DQNConfig.

`--runners N` sets env_runners.num_env_runners (0: sampling in-process, no Ray); `--overlap`
sets env_runners.overlap (with --runners 0: one runner actor beside the learner); `--envs-per-runner N`
sets env_runners.num_envs_per_env_runner (the scenario's own otherwise; `--runners 2 --envs-per-runner 4`
keeps simple_spread's 8 envs in all, on two runner processes). `--worlds W` (VMAS tasks) runs W worlds
instead of the scenario's 32 with the iteration and minibatches scaled alike (`scaled_to_worlds`).
`--config fine-tuned` (VMAS tasks) runs BenchMARL's fine-tuned VMAS experiment instead of the scenario:
`algorithm=mappo|ippo task=vmas/balance|navigation experiment=benchmarl_vmas` (BenchMARL's task parameters:
balance and navigation with 4 and 3 agents), `--worlds W` its worlds (600 otherwise), no evaluation (`fine_tuned_items`).
The return is `episode_return_mean`: the mean over the episodes that finished
during the iteration, summed over agents.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
import _path  # noqa: E402,F401  (benchmarks/ on sys.path: the shared helpers)
from _events import emit, run_loop  # noqa: E402

emit("started")

import marl  # noqa: E402

SCENARIOS = {
    "ppo_cartpole": ROOT / "scenarios" / "cartpole_ppo.yaml",
    "ppo_spread": ROOT / "scenarios" / "simple_spread_ppo.yaml",
    "mappo_spread": ROOT / "scenarios" / "simple_spread_mappo.yaml",
    "dqn_cartpole": ROOT / "scenarios" / "cartpole_dqn.yaml",
    "mappo_balance": ROOT / "scenarios" / "vmas_balance_mappo.yaml",
    "ppo_balance": ROOT / "scenarios" / "vmas_balance_mappo.yaml",  # as PPO: see make_config
    "mappo_navigation": ROOT / "scenarios" / "vmas_navigation_mappo.yaml",
    "ppo_navigation": ROOT / "scenarios" / "vmas_navigation_mappo.yaml",  # as PPO
}
AS_PPO = {"ppo_balance", "ppo_navigation"}  # a MAPPO scenario run with PPO
# `--config fine-tuned`: BenchMARL's fine-tuned VMAS experiment, composed from the groups (marl's IPPO is PPO with
# one policy shared by alike agents)
FINE_TUNED = {"mappo_balance": ("mappo", "vmas/balance"), "ppo_balance": ("ippo", "vmas/balance"),
              "mappo_navigation": ("mappo", "vmas/navigation"), "ppo_navigation": ("ippo", "vmas/navigation")}


def scaled_to_worlds(data: dict, worlds: int) -> dict:
    """The VMAS scenario at `worlds` worlds: the same fragment (one 100-step episode per world per
    iteration), so the train batch and the minibatch grow with the worlds and every epoch keeps the
    scenario's number of minibatches (benchmarl_tasks.py scales BenchMARL's the same way)."""
    factor = worlds / data["env_runners"]["num_envs_per_env_runner"]
    training = data["training"]
    if (training["train_batch_size"] * factor) % 1 or (training["minibatch_size"] * factor) % 1:
        raise SystemExit(f"--worlds {worlds}: the scenario's batch and minibatch do not scale to whole rows")
    data["env_runners"]["num_envs_per_env_runner"] = worlds
    training["train_batch_size"] = int(training["train_batch_size"] * factor)
    training["minibatch_size"] = int(training["minibatch_size"] * factor)
    return data


def fine_tuned_items(task: str, seed: int, worlds: int | None = None) -> list[str]:
    """`task` under BenchMARL's fine-tuned VMAS experiment: `algorithm=A task=vmas/T experiment=benchmarl_vmas` (its
    10M budget aside: the caller's loop stops the run), at `worlds` worlds (the preset's 600 otherwise: 100-step
    fragments, the train batch every world's, minibatches of 4,096 env steps' rows or the whole batch if smaller, 3
    epochs), training returns only:
    no evaluation, checkpoints or loggers, as the BenchMARL side runs."""
    if task not in FINE_TUNED:
        raise SystemExit(f"--config fine-tuned is for the VMAS tasks ({', '.join(FINE_TUNED)}), not {task}")
    algorithm, vmas_task = FINE_TUNED[task]
    return [f"algorithm={algorithm}", f"task={vmas_task}", "experiment=benchmarl_vmas", f"debugging.seed={seed}",
            *([f"env_runners.num_envs_per_env_runner={worlds}"] if worlds is not None else []),
            # under 41 worlds the batch is under one 4,096-step minibatch: the whole batch then
            *(["training.minibatch_size=${mul:%d,${environment.env_config.n_agents}}" % (worlds * 100)]
              if worlds is not None and worlds * 100 < 4096 else []),
            "evaluation.evaluation_interval=null", "loggers.tensorboard=false", "loggers.csv=false"]


def make_config(task: str, runners: int, seed: int, overlap: bool = False, envs_per_runner: int | None = None,
                worlds: int | None = None, fine_tuned: bool = False):
    scenario = SCENARIOS[task]
    if fine_tuned:
        from marl.config.compose import compose

        cfg = compose(None, fine_tuned_items(task, seed, worlds), name=f"{task}-benchmarl_vmas").config(validate=True)
    elif task == "dqn_cartpole":
        try:
            from marl import DQNConfig
        except ImportError:
            return None
        cfg = marl.load_scenario(scenario) if scenario.is_file() else DQNConfig().environment("CartPole-v1")
    elif task in AS_PPO or worlds is not None:
        from omegaconf import OmegaConf

        from marl.config.scenario import config_from_dict

        data = OmegaConf.to_container(OmegaConf.load(scenario))
        if task in AS_PPO:  # the MAPPO scenario's settings with PPO: no centralised critic, no agent id
            data["algo"] = "PPO"
            data["training"].pop("agent_id", None)
        if worlds is not None:
            if "vmas" not in data["environment"]["env"]:
                raise SystemExit(f"--worlds is for the VMAS tasks, not {task}")
            data = scaled_to_worlds(data, worlds)
        cfg = config_from_dict(data, where=f"{scenario} ({task}, worlds {worlds or 'as set'})")
    else:
        cfg = marl.load_scenario(scenario)
    cfg.env_runners(num_env_runners=max(runners, 1) if overlap else runners, overlap=overlap)
    if envs_per_runner is not None:
        cfg.env_runners(num_envs_per_env_runner=envs_per_runner)
    cfg.debugging(seed=seed)
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task", choices=sorted(SCENARIOS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runners", type=int, default=0, help="remote env runners (0: in-process, no Ray)")
    ap.add_argument("--overlap", action="store_true", help="env_runners.overlap: sample beside the learner")
    ap.add_argument("--envs-per-runner", type=int, default=None, help="env_runners.num_envs_per_env_runner")
    ap.add_argument("--worlds", type=int, default=None, help="VMAS tasks: worlds (the scenario's 32 otherwise)")
    ap.add_argument("--config", choices=["matched", "defaults", "fine-tuned"], default="matched",
                    help="fine-tuned (VMAS tasks): BenchMARL's fine-tuned VMAS experiment, the preset composition "
                         "(fine_tuned_items); otherwise the task's scenario (matched and defaults: accepted for symmetry)")
    ap.add_argument("--target-return", type=float, default=None)
    ap.add_argument("--max-env-steps", type=int, default=10**9)
    ap.add_argument("--max-train-s", type=float, default=600.0)
    ap.add_argument("--device", default="cpu", help="VMAS tasks: env_runners.device, and one GPU for the learner if not cpu")
    args = ap.parse_args()

    cfg = make_config(args.task, args.runners, args.seed, args.overlap, args.envs_per_runner, args.worlds,
                      args.config == "fine-tuned")
    if cfg is None:
        emit("unavailable", why="marl has no DQN yet")
        return
    if args.device != "cpu":
        cfg.env_runners(device=args.device).learners(num_gpus_per_learner=1)
    algo = cfg.build()
    emit("built")

    def train():
        result = algo.train()
        return result["env_steps_total"], result["episode_return_mean"], result["episodes_this_iter"]

    try:
        run_loop(train, target_return=args.target_return, max_env_steps=args.max_env_steps, max_train_s=args.max_train_s)
    finally:
        algo.stop()
        if args.runners or args.overlap:
            import ray

            ray.shutdown()


if __name__ == "__main__":
    main()
