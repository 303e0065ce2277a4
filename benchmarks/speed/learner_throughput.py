"""Learner throughput: PPO and MAPPO updates on simple_spread batches of 2k-64k agent rows, on the CPU and on CUDA.

    .venv/bin/python benchmarks/speed/learner_throughput.py [--algos PPO,MAPPO] [--devices cpu,cuda] [--rows 2048,...,65536]
                                                      [--minibatch 512,8192] [--repeats 3] [--json out.json]
    .venv/bin/python benchmarks/speed/learner_throughput.py --tanh-ab --rows 6144 --minibatch 512 --repeats 30
    .venv/bin/python benchmarks/speed/learner_throughput.py --alloc-ab --algos PPO --rows 98304 --minibatch 24576 --repeats 5

Issue 17's GPU table. For each algorithm, an in-process Algorithm of its simple_spread scenario
(scenarios/simple_spread_ppo.yaml, simple_spread_mappo.yaml: 3 agents, one shared policy,
[128, 128] tanh, 5 epochs) samples a pool of rollout fragments once (8 envs x 85 env steps x 3
agents = 2,040 agent rows each). A batch of about N rows is the first round(N / 2,040) fragments
concatenated, as the workflow's `concat` node hands them to the learner. For each device (`cuda`:
`learners.num_gpus_per_learner=1`, skipped with a note when torch has no CUDA) and minibatch size,
one learner of that algorithm times `update(batch)` (after one warm-up update of that size),
which includes the learner's own preparation (GAE and, for MAPPO, the critic over the state
table), the move of the batch to the device (once per update, pinned memory) and every epoch's
minibatch steps. Figures, median over `--repeats`: seconds per update and samples/s = rows x
epochs / seconds (the rows the optimiser stepped over per second). CUDA times synchronise before
reading the clock.

Runs on any machine; on a CPU-only one it gives the CPU rows (the reference the GPU rows are
compared with). The machine is shared: say so next to any figure.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
import torch

import marl
from marl.data.records import SampledBatch
from marl.learners import learner as learner_module
from marl.modules import activations

SCENARIOS = {"PPO": "scenarios/simple_spread_ppo.yaml", "MAPPO": "scenarios/simple_spread_mappo.yaml"}
FRAGMENT = 85  # env steps per env copy: 8 x 85 x 3 agents = 2,040 rows per sample call
ROWS_PER_FRAGMENT = 8 * FRAGMENT * 3


def config_for(algo: str, device: str, minibatch: int):
    cfg = marl.load_scenario(C.REPO_ROOT / SCENARIOS[algo])
    cfg.env_runners(num_env_runners=0, rollout_fragment_length=FRAGMENT)
    cfg.training(minibatch_size=minibatch, train_batch_size=max(minibatch, cfg.training_cfg.train_batch_size))  # update() takes any batch
    cfg.learners(num_gpus_per_learner=1 if device == "cuda" else 0)
    cfg.debugging(seed=0)
    return cfg


def sample_pool(algo: str, fragments: int) -> list[SampledBatch]:
    built = config_for(algo, "cpu", 512).build()
    try:
        return [built.runners.local.sample() for _ in range(fragments)]
    finally:
        built.stop()


def time_updates(algo: str, device: str, minibatch: int, batch, repeats: int) -> list[float]:
    built = config_for(algo, device, minibatch).build()
    learner = built.learners.local
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    try:
        learner.update(batch)  # warm-up: allocator, kernels, Adam state
        sync()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            learner.update(batch)
            sync()
            times.append(time.perf_counter() - t0)
        return times
    finally:
        built.stop()


def tanh_ab(algo: str, minibatch: int, batch, repeats: int) -> tuple[list[float], list[float]]:
    """CPU update seconds with torch.tanh everywhere (activations.SMALL raised past any block) and with marl's
    tanh, one learner, alternating update by update (the order flips each repeat), so drift hits both alike."""
    built = config_for(algo, "cpu", minibatch).build()
    learner, small = built.learners.local, activations.SMALL
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        learner.update(batch)
        for i in range(repeats):
            for baseline in ((True, False) if i % 2 else (False, True)):
                activations.SMALL = float("inf") if baseline else small
                t0 = time.perf_counter()
                learner.update(batch)
                times[baseline].append(time.perf_counter() - t0)
        return times[True], times[False]
    finally:
        activations.SMALL = small
        built.stop()


def alloc_side(algo: str, minibatch: int, size: int, repeats: int, keep: bool) -> dict:
    """One process's updates, with marl's heap setting (`marl.learners.memory`) or glibc's defaults: CPU seconds and
    minor page faults per update."""
    if not keep:
        learner_module.keep_freed_memory = lambda: False
    pool = sample_pool(algo, max(1, round(size / ROWS_PER_FRAGMENT)))
    batch = SampledBatch.concat(pool).batch
    built = config_for(algo, "cpu", minibatch).build()
    learner = built.learners.local
    try:
        learner.update(batch)
        cpu, faults = [], []
        for _ in range(repeats):
            c, f = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            learner.update(batch)
            cpu.append(time.process_time() - c)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)
        return {"rows": batch.agent_steps(), "cpu_s": cpu, "faults": faults}
    finally:
        built.stop()


def alloc_ab(algos: list[str], sizes: list[int], minibatches: list[int], repeats: int) -> None:
    """glibc's default heap against marl's kept heap: fresh processes alternating (off, on, on, off), CPU time per update."""
    rows = []
    for algo in algos:
        for size in sizes:
            for minibatch in minibatches:
                runs: dict[bool, list[dict]] = {False: [], True: []}
                for keep in (False, True, True, False):
                    p = subprocess.run([sys.executable, __file__, "--alloc-side", algo, str(minibatch), str(size),
                                        str(repeats), str(int(keep))], capture_output=True, text=True, check=True)
                    runs[keep].append(json.loads(p.stdout.strip().splitlines()[-1]))
                med = {k: (statistics.median(c for r in v for c in r["cpu_s"]),
                           statistics.median(f for r in v for f in r["faults"])) for k, v in runs.items()}
                rows.append([algo, f"{runs[True][0]['rows']:,}", str(minibatch), f"{med[False][0]:.3f}", f"{med[True][0]:.3f}",
                             f"{med[False][1]:,.0f} / {med[True][1]:,.0f}", f"{med[False][0] / med[True][0]:.3f}x"])
    C.print_table(["algo", "rows", "minibatch", "glibc default CPU s/update", "kept heap CPU s/update",
                   "minor faults/update (both)", "speed-up"], rows,
                  title=f"CPU learner updates, glibc's default heap vs marl's kept heap, medians of 2 x {repeats} per side")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algos", default="PPO,MAPPO")
    ap.add_argument("--devices", default="cpu,cuda")
    ap.add_argument("--rows", default="2048,4096,8192,16384,32768,65536", help="agent rows per update (about)")
    ap.add_argument("--minibatch", default="512,8192", help="minibatch sizes (rows per SGD step)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--tanh-ab", action="store_true",
                    help="instead: CPU updates with torch.tanh against marl's tanh (marl.modules.activations), alternating")
    ap.add_argument("--alloc-ab", action="store_true",
                    help="instead: CPU updates with glibc's default heap against marl's kept heap "
                         "(marl.learners.memory), fresh processes alternating")
    ap.add_argument("--alloc-side", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.alloc_side:
        algo, minibatch, size, repeats, keep = args.alloc_side
        print(json.dumps(alloc_side(algo, int(minibatch), int(size), int(repeats), keep == "1")))
        return
    algos = [a for a in args.algos.split(",") if a]
    unknown = [a for a in algos if a not in SCENARIOS]
    if unknown:
        ap.error(f"unknown --algos {unknown}; known: {list(SCENARIOS)}")
    devices = [d for d in args.devices.split(",") if d]
    if "cuda" in devices and not torch.cuda.is_available():
        print(f"no CUDA here (torch {torch.__version__}): the cuda rows are skipped")
        devices = [d for d in devices if d != "cuda"]
    sizes = [int(x) for x in args.rows.split(",")]
    minibatches = [int(x) for x in args.minibatch.split(",")]
    print(C.machine_line() + (f"; GPU: {torch.cuda.get_device_name(0)}" if "cuda" in devices else ""), flush=True)

    if args.alloc_ab:
        alloc_ab(algos, sizes, minibatches, args.repeats)
        return
    if args.tanh_ab:
        ab_rows = []
        for algo in algos:
            pool = sample_pool(algo, max(1, round(max(sizes) / ROWS_PER_FRAGMENT)))
            for size in sizes:
                batch = SampledBatch.concat(pool[: max(1, round(size / ROWS_PER_FRAGMENT))]).batch
                for minibatch in minibatches:
                    before, after = tanh_ab(algo, minibatch, batch, args.repeats)
                    b, a = statistics.median(before), statistics.median(after)
                    ab_rows.append([algo, f"{batch.agent_steps():,}", str(minibatch), f"{b:.3f}", f"{a:.3f}",
                                    f"{min(before):.3f} / {min(after):.3f}", f"{b / a:.3f}x"])
        C.print_table(["algo", "rows", "minibatch", "torch.tanh s/update", "marl tanh s/update", "min (both)", "speed-up"],
                      ab_rows, title=f"CPU learner updates, torch.tanh vs marl's tanh, medians of {args.repeats} alternating")
        return

    rows, records = [], []
    for algo in algos:
        t0 = time.perf_counter()
        pool = sample_pool(algo, max(1, round(max(sizes) / ROWS_PER_FRAGMENT)))
        print(f"  {algo}: sampled {len(pool)} fragments in {time.perf_counter() - t0:.1f} s", flush=True)
        epochs = config_for(algo, "cpu", 512).resolved().training_cfg.num_epochs  # (PPO's `auto` keys set)
        for size in sizes:
            batch = SampledBatch.concat(pool[: max(1, round(size / ROWS_PER_FRAGMENT))]).batch
            n = batch.agent_steps()
            for minibatch in minibatches:
                if minibatch > n:
                    continue
                per_device = {}
                for device in devices:
                    times = time_updates(algo, device, minibatch, batch, args.repeats)
                    per_device[device] = statistics.median(times)
                    records.append({"algo": algo, "device": device, "rows": n, "minibatch": minibatch,
                                    "epochs": epochs, "update_s": times})
                    print(f"  {algo} {device} rows {n:,} minibatch {minibatch}: {per_device[device]:.3f} s per update, "
                          f"{n * epochs / per_device[device]:,.0f} samples/s", flush=True)
                row = [algo, f"{n:,}", str(minibatch)]
                for device in devices:
                    row += [f"{per_device[device]:.3f}", C.fmt_num(n * epochs / per_device[device])]
                if len(devices) == 2:
                    row.append(f"{per_device[devices[0]] / per_device[devices[1]]:.2f}x")
                rows.append(row)
    header = ["algo", "rows", "minibatch"]
    for device in devices:
        header += [f"{device} s/update", f"{device} samples/s"]
    if len(devices) == 2:
        header.append(f"{devices[1]} speed-up")
    C.print_table(header, rows, title=f"Learner updates ({epochs} epochs), median of {args.repeats}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": C.machine_line(), "runs": records}, f, indent=1)


if __name__ == "__main__":
    main()
