"""JaxMARL's regression set side by side: its own baseline scripts, unmodified, against marl on the same envs.

    JAXMARL_SRC=/path/to/JaxMARL bash benchmarks/peers/setup_jaxmarl.sh      # once: JaxMARL's venv
    nice .venv/bin/python -m benchmarks --save jaxmarl_regression --cells ippo_ff/MPE_simple_spread_v3 \
        --seeds 0 1 2 --raw-dir runs/jaxmarl_regression/raw --json runs/jaxmarl_regression/marl_eval.json \
        --report docs/results/jaxmarl_regression
    .venv/bin/python benchmarks/peers/jaxmarl_regression.py --list       # every cell, and what marl runs it with

The cells are JaxMARL's minimal baseline set (baselines/run_minimal_baseline_set.yaml of the checkout: which script
and config each algorithm x env runs, and the 1e7 env-step budget): MPE spread/reference/tag x IPPO-FF, MAPPO-RNN,
QMIX-RNN, VDN-RNN, VDN-FF; SMAX 2s3z, 3s5z_vs_3s6z, smacv2_10_units, 6h_vs_8z x IPPO-RNN, MAPPO-RNN, QMIX-RNN,
VDN-RNN. Per cell and seed, each side a fresh process, back to back, the order rotating with the seed:
`JaxMARL` (the script's make_train over its published config, jitted whole, in its venv: jaxmarl_baseline.py; the
env and SEED set as the set's runner sets them, TOTAL_TIMESTEPS the budget) and `marl` (the env through marl's
JaxMARL adapter, composed from the config groups: the algorithm, the task and the JaxMARL preset of
conf/experiment/jaxmarl_*.yaml, which lists every setting with its JaxMARL key and what marl cannot express). A
cell is listed and not run where JaxMARL's own script fails on it (IPPO-FF and MAPPO-RNN on MPE tag: their scripts
stack the two teams' observation widths into one array); a note says where marl's run differs from JaxMARL's beyond
its preset (the Q-learning cells on tag: JaxMARL trains the four agents as one team on their summed reward).

Returns, per update on both sides, compared at equal env steps: JaxMARL's own logged return (MPE: MPELogWrapper's
`returned_episode_returns`, each agent's reward times the number of agents, averaged over them: the agents' summed
return; SMAX: the return of one ally over the episodes that ended in the update); marl's iteration
`episode_return_mean` (summed over the agents; divided by the allies on SMAX, whose reward every ally gets). A budget
below the cell's runs a prefix: JaxMARL's schedules (ANNEAL_LR, LR_LINEAR_DECAY, EPS_DECAY) are fractions of its
TOTAL_TIMESTEPS, so marl's lr annealing and epsilon decay are set to end where JaxMARL's do. Both sides' runs go into
one marl-eval JSON (environment `jaxmarl`, task the env, algorithms `<algo>-marl` / `<algo>-jaxmarl`; the score: the
returns over the last 10 % of the budget) and `--report DIR` runs `marl report` on it (IQM and mean with rliable's
95 % CIs, curves at equal env steps). Printed per cell: the returns at 25/50/75/100 % of the budget with the IQM
over seeds, and the wall time per run (process start to the end of training, JaxMARL's compile and marl's start-up
included). `--raw-dir` keeps each run's output; a run whose file is there is read, not rerun (an interrupted set
resumes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

T0 = time.time()

import _path  # noqa: E402,F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C  # noqa: E402
from _peer_curves import WINDOW, add_side_by_side_arguments, marl_eval, tables, train_to_budget, window_mean  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SIDES = ("JaxMARL", "marl")
BUDGET = 10_000_000  # the set's TOTAL_TIMESTEPS for MPE and SMAX


@dataclass(frozen=True)
class Cell:
    algo: str  # the set's algorithm name
    env: str  # the set's env name (MPE: ENV_NAME; SMAX: MAP_NAME)
    script: str  # the JaxMARL script the set runs for it
    alg: str = ""  # its Hydra alg file (QLearning scripts), "" for flat configs
    marl: tuple = ()  # compose items of marl's side; () where marl has no preset or task for it
    agents: int = 1  # agents a world (SMAX: allies)
    missing: str = ""  # why it is not run: what marl lacks, or where JaxMARL's own script fails on it
    note: str = ""  # how marl's run differs from JaxMARL's beyond what its preset and task list
    extra: dict = field(default_factory=dict)  # JaxMARL keys set beside the env and seed

    @property
    def runnable(self) -> bool:
        return bool(self.marl) and not self.missing

    @property
    def smax(self) -> bool:
        return self.script.endswith("_smax.py") or self.alg.endswith("_smax")

    @property
    def anneals_lr(self) -> bool:  # the lr reaches 0 at TOTAL_TIMESTEPS: PPO's ANNEAL_LR, the QLearning LR_LINEAR_DECAY
        return not self.alg or self.alg in LR_DECAYS

    @property
    def name(self) -> str:
        return f"{self.algo}/{self.env}"

    def jaxmarl_keys(self, budget: int, seed: int) -> dict:
        env_key = "MAP_NAME" if self.env[0].isdigit() or self.env.startswith("smacv2") else "ENV_NAME"
        return {env_key: self.env, "SEED": seed, "TOTAL_TIMESTEPS": budget, **self.extra}


# The QLearning alg files' NUM_ENVS x NUM_STEPS (env steps of one update: EPS_DECAY is a fraction of the updates, 0.1
# in each, to EPS_FINISH 0.05), and those with LR_LINEAR_DECAY True (ql_rnn_smax's is False)
UPDATE_STEPS = {"ql_rnn_mpe": 8 * 26, "ql_rnn_smax": 16 * 128, "vdn_ff_mpe": 32 * 16}
LR_DECAYS = ("ql_rnn_mpe", "vdn_ff_mpe")
# simple_tag: why two of its cells have no JaxMARL side, and how marl's Q-learning cells differ from JaxMARL's
TAG_FAILS = {"ippo_ff": "JaxMARL's ippo_ff_mpe.py fails on it: its batchify calls pad() without the width to pad the "
                        "good agent's 14 observations to the adversaries' 16 (TypeError)",
             "mappo_rnn": "JaxMARL's mappo_rnn_mpe.py fails on it: MPEWorldStateWrapper and batchify stack the 16- and "
                          "14-wide observations into one array (ValueError)"}
TAG_NOTE = ("JaxMARL trains the four agents as ONE team, one network over zero-padded observations, on the sum of "
            "their rewards (CTRolloutManager: 20 a contact, so its good agent learns to be caught); marl, whose "
            "adapter does not pad, trains a team per policy on its own reward (the good agent flees): both log the "
            "four agents' summed return, but of different games, so the returns do not compare")


def _cells() -> list[Cell]:
    mpe = {"MPE_simple_spread_v3": ("jaxmarl/simple_spread", 3), "MPE_simple_reference_v3": ("jaxmarl/simple_reference", 2),
           "MPE_simple_tag_v3": ("jaxmarl/simple_tag", 4)}
    smax = {"2s3z": 5, "3s5z_vs_3s6z": 8, "smacv2_10_units": 10, "6h_vs_8z": 6}
    # the PPO presets' batch: every agent's rows of one round (their files count simple_spread's 3, 2s3z's 5)
    batch = "training.train_batch_size=${{mul:${{env_runners.num_envs_per_env_runner}},${{env_runners.rollout_fragment_length}},{}}}"
    out = []
    for env, (task, n) in mpe.items():
        tag = env == "MPE_simple_tag_v3"
        for algo, script, alg, preset in (("ippo_ff", "baselines/IPPO/ippo_ff_mpe.py", "", "jaxmarl_ippo_ff_mpe"),
                                          ("mappo_rnn", "baselines/MAPPO/mappo_rnn_mpe.py", "", "jaxmarl_mappo_rnn_mpe"),
                                          ("qmix_rnn", "baselines/QLearning/qmix_rnn.py", "ql_rnn_mpe", "jaxmarl_ql_rnn_mpe"),
                                          ("vdn_rnn", "baselines/QLearning/vdn_rnn.py", "ql_rnn_mpe", "jaxmarl_ql_rnn_mpe"),
                                          ("vdn_ff", "baselines/QLearning/vdn_ff.py", "vdn_ff_mpe", "jaxmarl_vdn_ff_mpe")):
            algorithm = {"ippo_ff": "ippo", "vdn_ff": "vdn"}.get(algo, algo)
            items = (f"algorithm={algorithm}", f"task={task}", f"experiment={preset}", *([batch.format(n)] if not alg else []))
            out.append(Cell(algo, env, script, alg, items, agents=n, missing=TAG_FAILS.get(algo, "") if tag else "",
                            note=TAG_NOTE if tag and alg else ""))
    for env, n in smax.items():
        for algo, script, alg, preset in (("ippo_rnn", "baselines/IPPO/ippo_rnn_smax.py", "", "jaxmarl_ippo_rnn_smax"),
                                          ("mappo_rnn", "baselines/MAPPO/mappo_rnn_smax.py", "", "jaxmarl_mappo_rnn_smax"),
                                          ("qmix_rnn", "baselines/QLearning/qmix_rnn.py", "ql_rnn_smax", "jaxmarl_ql_rnn_smax"),
                                          ("vdn_rnn", "baselines/QLearning/vdn_rnn.py", "ql_rnn_smax", "jaxmarl_ql_rnn_smax")):
            items = (f"algorithm={algo}", f"task=smax/{env}", f"experiment={preset}", *([batch.format(n)] if not alg else []))
            out.append(Cell(algo, env, script, alg, items, agents=n))
    return out


CELLS = {cell.name: cell for cell in _cells()}
NOTES = list(dict.fromkeys(c.note for c in CELLS.values() if c.note))


def marl_items(cell: Cell, seed: int, budget: int, threads: int) -> list[str]:
    items = [*cell.marl, f"debugging.seed={seed}", f"stop.env_steps_total={budget}", f"learners.num_threads={threads}",
             "loggers.tensorboard=false", "loggers.csv=false"]
    if budget != BUDGET and cell.anneals_lr:  # JaxMARL anneals its lr over TOTAL_TIMESTEPS, the budget here
        items.append(f"learners.lr_multiplier=[[0,1.0],[{budget},0.0]]")
    if budget != BUDGET and cell.alg:  # ... and its epsilon over 10 % of the updates TOTAL_TIMESTEPS makes
        step = UPDATE_STEPS[cell.alg]
        items.append(f"training.epsilon=[[0,1.0],[{round(0.1 * (budget // step) * step)},0.05]]")
    return items


def marl_side(name: str, seed: int, budget: int, threads: int) -> dict:
    """One marl run in this process (started by `--side`): per iteration its env steps and return."""
    from marl.config.compose import compose

    cell = CELLS[name]
    algo = compose(None, marl_items(cell, seed, budget, threads), name=f"{cell.algo}-jaxmarl").config(validate=True).build()
    row = train_to_budget(algo, budget, T0, {"returns": "episode_return_mean"})
    algo.stop()
    if cell.smax:  # SMAX's return is one ally's (every ally gets the team's reward)
        row["returns"] = [value / cell.agents for value in row["returns"]]
    return row


def run_side(cell: Cell, side: str, seed: int, budget: int, jax_python: Path, src: str, threads: int,
             raw_dir: Path) -> dict:
    raw = raw_dir / f"{cell.algo}_{cell.env}_{side}_seed{seed}.json"
    if raw.is_file():
        print(f"{cell.name} seed {seed} {side}: read from {raw}", flush=True)
        return json.loads(raw.read_text())
    if side == "JaxMARL":
        cmd = [str(jax_python), str(HERE / "jaxmarl_baseline.py"), src, cell.script, cell.alg,
               json.dumps(cell.jaxmarl_keys(budget, seed))]
    else:
        cmd = [sys.executable, __file__, "--side", cell.name, str(seed), str(budget), str(threads)]
    # One thread a side: XLA's Eigen pool off, one intra-op thread, one OpenMP thread (marl: learners.num_threads).
    flags = {"OMP_NUM_THREADS": str(threads), "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
                                                        f"intra_op_parallelism_threads={threads}"}
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=12 * 3600, env={**os.environ, **flags})
    if p.returncode != 0:
        raise SystemExit(f"{cell.name} {side} seed {seed} failed:\n{p.stderr[-3000:]}")
    row = {"cell": cell.name, "side": side, "seed": seed, "command": cmd, **json.loads(p.stdout.strip().splitlines()[-1])}
    row.pop("config", None)
    raw_dir.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(row))
    return row


def list_cells() -> None:
    C.print_table(["cell", "JaxMARL script", "marl"],
                  [[c.name, c.script + (f" +alg={c.alg}" if c.alg else ""),
                    " ".join(c.marl[:3]) + (f" (note {NOTES.index(c.note) + 1})" if c.note else "")
                    if c.runnable else f"not run: {c.missing}"] for c in CELLS.values()],
                  title="JaxMARL's minimal baseline set (MPE, SMAX)")
    for i, note in enumerate(NOTES, 1):
        print(f"note {i}: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", default=["ippo_ff/MPE_simple_spread_v3"], metavar="ALGO/ENV")
    parser.add_argument("--env-steps", type=int, default=BUDGET, help="env-step budget per run (the set's: 1e7)")
    parser.add_argument("--points", type=int, default=50, help="points of each curve in the marl-eval JSON")
    add_side_by_side_arguments(parser, ROOT / "runs" / "jaxmarl_regression" / "raw")
    parser.add_argument("--list", action="store_true", help="list the cells and what marl runs each with")
    parser.add_argument("--side", nargs=4, metavar=("CELL", "SEED", "BUDGET", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:  # a marl run in this fresh process
        print(json.dumps(marl_side(args.side[0], *map(int, args.side[1:]))))
        return
    if args.list:
        return list_cells()
    unknown = [name for name in args.cells if name not in CELLS]
    lacking = [f"{name} ({CELLS[name].missing})" for name in args.cells if name in CELLS and not CELLS[name].runnable]
    if unknown or lacking:
        raise SystemExit(f"--cells: unknown {unknown}; marl cannot run {lacking} (see --list)")
    venv = Path(args.jaxmarl_venv)
    src = C.jaxmarl_source(venv, args.jaxmarl_src)
    budget = args.env_steps
    print(f"jaxmarl_regression: {C.machine_line()}, {budget:,} env steps per run, seeds {args.seeds}", flush=True)
    rows = []
    for cell in (CELLS[name] for name in args.cells):
        for i, seed in enumerate(args.seeds):
            for side in SIDES[i % 2:] + SIDES[:i % 2]:  # alternate who runs first (the machine drifts)
                row = run_side(cell, side, seed, budget, venv / "bin" / "python", src, args.threads, Path(args.raw_dir))
                rows.append(row)
                print(f"{cell.name} seed {seed} {side:>7}: return {window_mean(row, (1 - WINDOW) * budget, budget):8.2f} "
                      f"over the last 10 %, {row['startup_s'] + row['train_s']:.0f} s (start-up {row['startup_s']:.0f} s), "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        tables([r for r in rows if r["cell"] == cell.name], budget, args.reps)
    if args.json:
        place = lambda r: ("jaxmarl", r["cell"].split("/")[1], f"{r['cell'].split('/')[0]}-{r['side'].lower()}")  # noqa: E731
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(marl_eval(rows, budget, -(-budget // args.points), place), indent=1))
        if args.report:
            from marl.experiment.report import write_report

            print("report:", *write_report([args.json], args.report, reps=args.reps, points=args.points), sep="\n  ")


if __name__ == "__main__":
    main()
