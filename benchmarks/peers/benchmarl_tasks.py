"""The BenchMARL side of benchmarks/peers/compare_benchmarl.py: one task in a fresh process, printing events.

    /work/venvs/benchmarl/bin/python benchmarks/peers/benchmarl_tasks.py TASK [--seed 0] [--max-env-steps N]

Runs in BenchMARL's own venv (benchmarks/peers/setup_benchmarl.sh), never in marl's. Tasks:

* mappo_spread / ippo_spread: PettingZoo simple_spread_v3 (3 agents, discrete actions,
  25 cycles), BenchMARL's MAPPO / IPPO with the settings of marl's scenarios
  (scenarios/simple_spread_mappo.yaml, simple_spread_ppo.yaml): 8 vectorised envs, 2,048 env
  steps per iteration, 5 epochs, minibatch 512 agent rows (BenchMARL counts a minibatch in env
  steps of all agents: 171 x 3 = 513 rows), lr 1e-3, Adam eps 1e-5, [128, 128] tanh for actor
  and critic, shared parameters, gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value loss
  weight 0.5, gradient norm clip 0.5; no evaluation, no loggers.

* mappo_balance / ippo_balance: VMAS balance (3 agents carry a package on a pole; continuous
  actions, 100 steps), with the settings of scenarios/vmas_balance_mappo.yaml: one VMAS env of 32
  worlds, 3,200 env steps per iteration (32 x 100), 4 epochs, minibatch 800 agent rows (267 env
  steps x 3 = 801 rows), lr 5e-4, entropy 0, [128, 128] tanh, shared parameters; the rest as above.
  Needs `vmas` in BenchMARL's venv (setup_benchmarl.sh installs it). Left as each library has it:
  the action distribution (marl: a Gaussian with a state-independent log-std, actions clipped to
  the bounds; BenchMARL: a tanh-squashed Gaussian whose scale the network outputs) and marl's
  agent-id one-hot (MAPPO's `agent_id`; BenchMARL appends none).

* mappo_navigation / ippo_navigation: VMAS navigation (4 agents, each to its own goal, lidar;
  continuous actions, 100 steps) with BenchMARL's own navigation.yaml kwargs (the same that
  scenarios/vmas_navigation_mappo.yaml sets) and n_agents 4: 32 worlds, 3,200 env steps per
  iteration, 4 epochs, minibatch 800 agent rows (200 env steps x 4), the rest as balance.

`--config fine-tuned` (VMAS tasks): BenchMARL's fine-tuned VMAS experiment instead (`fine_tuned`: gamma 0.9, lr
5e-5, Adam eps 1e-6, gradient norm 5, 600 worlds x 100 frames an iteration, 45 minibatch iterations of 4,096
frames), the algorithm's, the model's (layers/mlp.yaml: [256, 256] tanh) and the task's yamls as BenchMARL ships
them; marl_tasks.py's `--config fine-tuned` is the same experiment composed from marl's preset.

`--worlds W` (VMAS tasks) runs W worlds instead of 32, scaled as marl_tasks.py scales marl's
scenario: W x 100 env steps per iteration, the minibatch W / 32 times as many rows (so every epoch
keeps its number of minibatches), rounded up to whole env steps.

The return emitted per iteration is BenchMARL's collection return (mean over the episodes that
ended in the iteration of the mean over agents) times the number of agents: the episode return
summed over agents, as marl reports it.
"""

from __future__ import annotations

import argparse
import tempfile

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
from _events import emit

emit("started")

import os  # noqa: E402

os.environ["TQDM_DISABLE"] = "1"  # its progress bar writes '\r' lines into stdout's event lines

import torch  # noqa: E402
import torchrl.envs.libs.pettingzoo as tr_pz  # noqa: E402



def _with_mpe2() -> dict:
    """torchrl looks for MPE under `pettingzoo.mpe`, which PettingZoo 1.27 moved to the mpe2 package."""
    from mpe2.all_modules import mpe_environments

    return dict(mpe_environments)


tr_pz._load_available_envs = _with_mpe2

from benchmarl.algorithms import IppoConfig, MappoConfig  # noqa: E402
from benchmarl.environments import PettingZooTask, VmasTask  # noqa: E402
from benchmarl.experiment import Callback, Experiment, ExperimentConfig  # noqa: E402
from benchmarl.models.mlp import MlpConfig  # noqa: E402

ALGORITHMS = {"mappo_spread": MappoConfig, "ippo_spread": IppoConfig, "mappo_balance": MappoConfig, "ippo_balance": IppoConfig,
              "mappo_navigation": MappoConfig, "ippo_navigation": IppoConfig}
VMAS_WORLDS = 32  # the VMAS scenarios' worlds, which --worlds scales from
VMAS_MINIBATCH_ROWS = 800  # agent rows per minibatch at 32 worlds (marl's scenarios)


def spread_settings(worlds: int | None):
    if worlds is not None:
        raise SystemExit("--worlds is for the VMAS tasks")
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update({"N": 3, "max_cycles": 25})
    # agents, env steps per iteration, vectorised envs, epochs, minibatch (env steps), lr, entropy, continuous actions
    return task, dict(agents=3, frames=2048, envs=8, epochs=5, minibatch=171, lr=1e-3, entropy=0.01, continuous=False)


def vmas_settings(task, agents: int, worlds: int | None):
    """A VMAS task at `worlds` worlds (32 by default): one 100-step episode per world per iteration."""
    worlds = worlds or VMAS_WORLDS
    task.config.update({"n_agents": agents, "max_steps": 100})
    rows = VMAS_MINIBATCH_ROWS * worlds / VMAS_WORLDS
    minibatch = -(-rows // agents)  # env steps of all agents, rounded up: 800 rows = 267 x 3 (801) = 200 x 4
    return task, dict(agents=agents, frames=worlds * 100, envs=worlds, epochs=4, minibatch=int(minibatch), lr=5e-4,
                      entropy=0.0, continuous=True)


SETTINGS = {"spread": spread_settings,
            "balance": lambda worlds: vmas_settings(VmasTask.BALANCE.get_from_yaml(), 3, worlds),
            # navigation.yaml's kwargs as BenchMARL ships them (scenarios/vmas_navigation_mappo.yaml copies them)
            "navigation": lambda worlds: vmas_settings(VmasTask.NAVIGATION.get_from_yaml(), 4, worlds)}


FINE_TUNED_WORLDS = 600  # on_policy_n_envs_per_worker of BenchMARL's fine-tuned VMAS experiment
VMAS_TASKS = {"balance": VmasTask.BALANCE, "navigation": VmasTask.NAVIGATION}


def fine_tuned(cfg, worlds: int | None) -> None:
    """BenchMARL's fine-tuned VMAS experiment (fine_tuned/vmas/conf/config.yaml at 1.5.0-10-g179a956, the version
    marl's conf/experiment/benchmarl_vmas.yaml copies key by key) over the base experiment, at `worlds` worlds (600
    otherwise): 100-step episodes, one per world per iteration; its 45 minibatch iterations of 4,096 frames (3.07
    passes over the batch) scaled with the worlds as marl's 3 epochs of 4,096-frame minibatches are (43.9 at 600),
    the minibatch the whole batch under 41 worlds."""
    worlds = worlds or FINE_TUNED_WORLDS
    cfg.share_policy_params, cfg.prefer_continuous_actions = True, True
    cfg.gamma, cfg.lr, cfg.adam_eps = 0.9, 5e-5, 1e-6
    cfg.clip_grad_norm, cfg.clip_grad_val = True, 5.0
    cfg.on_policy_collected_frames_per_batch, cfg.on_policy_n_envs_per_worker = worlds * 100, worlds
    minibatch = min(4096, worlds * 100)  # the whole batch under 41 worlds, as marl_tasks.py's
    cfg.on_policy_minibatch_size = minibatch
    # 45 iterations of 4,096 frames per 60,000: 3.07 passes over the batch, kept at any worlds
    cfg.on_policy_n_minibatch_iters = max(1, round(45 * 4096 / 60_000 * worlds * 100 / minibatch))


class Events(Callback):
    """Emits one `iter` event per iteration, after its training (marl emits after train() returns)."""

    def __init__(self, max_env_steps: int, agents: int):
        super().__init__()
        self.max_env_steps, self.agents = max_env_steps, agents
        self.iter = 0
        self.episodes = 0

    def on_batch_collected(self, batch):
        self.episodes = int(self.experiment.logger._get_global_done(batch).sum())

    def on_train_end(self, training_td, group):
        self.iter += 1
        ret = self.experiment.mean_return * self.agents if self.episodes else float("nan")
        frames = int(self.experiment.total_frames)
        emit("iter", iter=self.iter, env_steps=frames, episodes=self.episodes, **{"return": float(ret)})
        if frames >= self.max_env_steps:
            emit("done", reason=f"env steps {frames} >= {self.max_env_steps}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("task", choices=sorted(ALGORITHMS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-env-steps", type=int, default=30_720)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--worlds", type=int, default=None, help="VMAS tasks: worlds (32 otherwise)")
    ap.add_argument("--device", default="cpu", help="sampling, train and buffer device (VMAS tasks: the worlds too)")
    ap.add_argument("--config", choices=["matched", "fine-tuned"], default="matched",
                    help="fine-tuned (VMAS tasks): BenchMARL's fine-tuned VMAS experiment with its algorithm, model and "
                         "task yamls unchanged; matched: marl's scenario settings (above)")
    ap.add_argument("--parallel", action="store_true",
                    help="experiment.parallel_collection: the envs in TorchRL's ParallelEnv (one process per env)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    env = args.task.split("_")[1]
    cfg = ExperimentConfig.get_from_yaml()
    if args.config == "fine-tuned":
        if env not in VMAS_TASKS:
            raise SystemExit(f"--config fine-tuned is for the VMAS tasks, not {args.task}")
        task, algorithm, model = VMAS_TASKS[env].get_from_yaml(), ALGORITHMS[args.task].get_from_yaml(), MlpConfig.get_from_yaml()
        fine_tuned(cfg, args.worlds)
        agents = int(task.config["n_agents"])
    else:
        task, settings = SETTINGS[env](args.worlds)
        algorithm = ALGORITHMS[args.task].get_from_yaml()
        algorithm.entropy_coef, algorithm.lmbda, algorithm.clip_epsilon = settings["entropy"], 0.95, 0.2
        algorithm.critic_coef, algorithm.loss_critic_type, algorithm.share_param_critic = 0.5, "l2", True
        model = MlpConfig(num_cells=[128, 128], layer_class=torch.nn.Linear, activation_class=torch.nn.Tanh)
        cfg.share_policy_params, cfg.prefer_continuous_actions = True, settings["continuous"]
        cfg.gamma, cfg.lr, cfg.adam_eps = 0.99, settings["lr"], 1e-5
        cfg.clip_grad_norm, cfg.clip_grad_val = True, 0.5
        cfg.on_policy_collected_frames_per_batch = settings["frames"]
        cfg.on_policy_n_envs_per_worker = settings["envs"]
        cfg.on_policy_n_minibatch_iters = settings["epochs"]
        cfg.on_policy_minibatch_size = settings["minibatch"]
        agents = settings["agents"]
    cfg.sampling_device = cfg.train_device = cfg.buffer_device = args.device
    cfg.parallel_collection = args.parallel
    cfg.max_n_frames = args.max_env_steps
    cfg.evaluation, cfg.render, cfg.loggers, cfg.create_json = False, False, [], False
    cfg.checkpoint_interval, cfg.checkpoint_at_end = 0, False
    cfg.save_folder = tempfile.mkdtemp(prefix="benchmarl-")
    experiment = Experiment(task=task, algorithm_config=algorithm, model_config=model, critic_model_config=model,
                            seed=args.seed, config=cfg, callbacks=[Events(args.max_env_steps, agents)])
    emit("built")
    experiment.run()


if __name__ == "__main__":
    main()
