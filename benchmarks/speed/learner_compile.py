"""The learner's minibatch step, eager against torch.compile (the loss, or the whole step), side by side on one thread.

    .venv/bin/python benchmarks/speed/learner_compile.py [--algos PPO,MAPPO] [--minibatch 1536,8192] [--repeats 15]
                                                         [--variants eager,loss,loss-autotune,backward,step]
                                                         [--warm-cache]

Issue 41's captured steps, CPU half. The batch is JaxMARL's IPPO-FF MPE setting (`algorithm=ippo
task=jaxmarl/simple_spread experiment=jaxmarl_ippo_ff_mpe`: 16 worlds x 128 steps x 3 agents = 6,144
rows, [64, 64] tanh actor and critic; MAPPO: `algorithm=mappo` with the same experiment, its critic on
the state), sampled once (two samples concatenated where a minibatch is larger than one). One learner
update on it, at `training.minibatch_size` = the size measured, is run with `_step_group` wrapped to keep
every (group, minibatch) it steps on; those minibatches (4 epochs x their slices, the learner's own
joins and GAE columns) are then stepped again, by each variant in turn on the same learner (the same
parameters and Adam state), the variants' order rotating each repeat. A minibatch step is the
learner's: loss (forward), zero_grad, backward, gradient clip, fused Adam step. Variants:

    eager          `Learner._step_group` as it runs today
    loss           each group's loss through torch.compile (mode default): `learners.compile_loss`
    loss-autotune  the same, mode "max-autotune-no-cudagraphs"
    backward       `loss`, and the backward pass under compiled autograd (the whole backward graph, gradient
                   accumulation included, compiled as one); clip and the fused Adam eager
    step           `backward`, and the clip and Adam (in plain tensor ops: inductor has no lowering of the
                   fused kernel) one compiled function: the step in three graphs. (One graph for the whole
                   step, backward traced by dynamo with `trace_autograd_ops`, fails in torch 2.13: a [1]
                   gradient assigned to the [1, 64] value head.)

Reported per variant: the median ms per minibatch step over `--repeats` passes over the kept minibatches
(wall and this process's CPU), eager / variant, and the compile, measured in a fresh process per variant
with an empty inductor cache (a first run's; `--warm-cache` keeps the machine's): the wall seconds of the
first pass less a steady pass (tracing and code generation), of the first step at two sizes not seen
before (1,000 and then 700 rows, as a batch's shorter last minibatch would be: torch.compile recompiles
at a new size, with the row count dynamic), and the graphs dynamo made before and at those sizes. The machine is shared with other
jobs: the ratios (one process, interleaved) are the figures to read, and the load is said beside them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
import torch
from torch._dynamo import compiled_autograd
from torch._dynamo.utils import counters

from marl.config.compose import compose
from marl.data.records import SampledBatch

PRESETS = {"PPO": ["algorithm=ippo"], "MAPPO": ["algorithm=mappo"]}
EXPERIMENT = ["task=jaxmarl/simple_spread", "experiment=jaxmarl_ippo_ff_mpe", "learners.num_threads=1",
              "learners.lr_multiplier=null", "loggers.tensorboard=false", "loggers.csv=false"]
ROWS = 16 * 128 * 3  # one sample: 16 worlds x 128 steps x 3 agents
ODD_SIZES = (1000, 700)  # a batch's shorter last minibatch: new row counts after the steady ones
MODES = {"loss": "default", "loss-autotune": "max-autotune-no-cudagraphs", "backward": "default", "step": "default"}


def build(algo: str, minibatch: int):
    items = [*PRESETS[algo], *EXPERIMENT, f"training.minibatch_size={minibatch}",
             f"training.train_batch_size={max(ROWS, minibatch)}"]
    return compose(None, items, name=f"learner-compile-{algo}").config(validate=True).build()


def kept_minibatches(built, samples: int) -> list[tuple]:
    """(group, minibatch) of every step of one learner update on `samples` samples, minibatches cloned."""
    learner, kept = built.learners.local, []
    step = learner._step_group

    def keep(pid, group, module, minibatch, cfg, targets):
        kept.append((pid, group, {k: v.clone() for k, v in minibatch.items()}))
        return step(pid, group, module, minibatch, cfg, targets)

    batch = SampledBatch.concat([built.runners.local.sample() for _ in range(samples)]).batch
    learner._step_group = keep
    try:
        learner.update(batch)
    finally:
        learner._step_group = step
    return kept


def step_fn(learner, variant: str):
    """One minibatch step of `variant` on the learner's parameters and optimisers: fn(pid, group, minibatch)."""
    if variant == "eager":
        return lambda pid, group, mb: learner._step_group(pid, group, learner.module[pid], mb, learner.train_cfgs[pid],
                                                          learner.targets.get(pid, {}))
    mode, compiled = MODES[variant], {}

    def step(pid, group, mb):
        if group.name not in compiled:  # the group's loss through torch.compile (`learners.compile_loss`)
            compiled[group.name] = dataclasses.replace(group, loss=torch.compile(group.loss, mode=mode))
        if variant.startswith("loss"):
            return learner._step_group(pid, compiled[group.name], learner.module[pid], mb, learner.train_cfgs[pid],
                                       learner.targets.get(pid, {}))
        optimizer, clipped = learner.optimizers[pid][group.name], learner._clipped[pid][group.name]
        loss, stats = compiled[group.name].loss(learner.module[pid], mb, learner.train_cfgs[pid],
                                                 learner.targets.get(pid, {}))
        optimizer.zero_grad(set_to_none=True)
        with compiled_autograd._enable(backward_compiler):  # the whole backward pass, accumulation too, one graph
            loss.backward()
        if variant == "backward":
            if group.grad_clip is not None:
                stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(clipped, group.grad_clip)
            optimizer.step()
        else:  # clip and Adam, one compiled function
            stats["grad_norm"] = clip_and_adam(clipped, optimizer, group.grad_clip)
        return stats

    backward_compiler = torch.compile(mode=mode, dynamic=True)
    clip_and_adam = torch.compile(_clip_and_adam, mode=mode)
    return step


def _clip_and_adam(clipped, optimizer, grad_clip):
    norm = torch.nn.utils.clip_grad_norm_(clipped, grad_clip) if grad_clip is not None else torch.zeros(())
    adam_in_ops(optimizer)
    return norm


@torch.no_grad()
def adam_in_ops(optimizer) -> None:
    """FusedAdam.step's update (torch's Adam, no weight decay) in elementwise ops a compiler can fuse; its state
    made by one eager step first (the kept minibatches' update did it)."""
    group = optimizer.param_groups[0]
    (beta1, beta2), lr, eps = group["betas"], group["lr"], group["eps"]
    for i, p in enumerate(optimizer.params):
        if p.grad is None:
            continue
        state = optimizer.state[i]
        step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        step.add_(1)
        m.lerp_(p.grad, 1 - beta1)
        v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        denom = (v.sqrt() / (1 - beta2**step).sqrt()).add_(eps)
        p.sub_(lr * m / ((1 - beta1**step) * denom))


def one_pass(fn, kept) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for pid, group, mb in kept:
        fn(pid, group, mb)
    return time.perf_counter() - wall, time.process_time() - cpu


def compile_side(algo: str, minibatch: int, variant: str) -> dict:
    """In a fresh process (with a fresh inductor cache unless --warm-cache): the first pass over the kept minibatches
    (the compile), a steady pass, then the first step at each of ODD_SIZES, and the graphs dynamo made."""
    built = build(algo, minibatch)
    try:
        learner = built.learners.local
        kept = whole_minibatches(kept_minibatches(built, max(1, -(-minibatch // ROWS))), minibatch)
        fn = step_fn(learner, variant)
        try:
            first = one_pass(fn, kept)[0]
        except Exception as e:  # noqa: BLE001  (a variant that does not compile is a result, not a crash)
            return {"failed": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
        steady = one_pass(fn, kept)[0]
        graphs = counters["stats"]["unique_graphs"]
        pid, group, mb = kept[0]
        odd = []
        for size in ODD_SIZES:
            t0 = time.perf_counter()
            fn(pid, group, {k: t[:size] for k, t in mb.items()})
            odd.append(time.perf_counter() - t0)
        return {"compile_s": first - steady, "odd_s": odd, "graphs": graphs,
                "odd_graphs": counters["stats"]["unique_graphs"] - graphs}
    finally:
        built.stop()


def whole_minibatches(kept: list, minibatch: int) -> list:
    return [k for k in kept if len(next(iter(k[2].values()))) == minibatch]


def measure(algo: str, minibatch: int, variants: list[str], repeats: int, warm_cache: bool) -> list[dict]:
    """Each variant's compile in its own process, then every variant's steady passes interleaved in this one."""
    compiles = {}
    for v in variants:
        env = dict(os.environ)
        if not warm_cache:
            env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="learner_compile-")
        p = subprocess.run([sys.executable, __file__, "--compile-side", algo, str(minibatch), v], env=env,
                           capture_output=True, text=True)
        if not warm_cache:
            shutil.rmtree(env["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
        if p.returncode != 0:
            raise SystemExit(f"{algo} {minibatch} {v}: the compile side failed:\n{p.stderr[-3000:]}")
        compiles[v] = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"  {algo} {minibatch} {v}: {compiles[v]}", flush=True)
    live = [v for v in variants if "failed" not in compiles[v]]
    built = build(algo, minibatch)
    try:
        learner = built.learners.local
        kept = whole_minibatches(kept_minibatches(built, max(1, -(-minibatch // ROWS))), minibatch)
        fns = {v: step_fn(learner, v) for v in live}
        for v in live:  # compiles (eager: warms the allocator)
            one_pass(fns[v], kept)
        times = {v: [] for v in live}
        for r in range(repeats):
            for v in live[r % len(live):] + live[: r % len(live)]:
                times[v].append(one_pass(fns[v], kept))
    finally:
        built.stop()
    out = []
    for v in variants:
        row = {"algo": algo, "minibatch": minibatch, "variant": v, **compiles[v]}
        if v in times:
            row.update(steps=len(kept), ms=statistics.median(w for w, _ in times[v]) / len(kept) * 1e3,
                       cpu_ms=statistics.median(c for _, c in times[v]) / len(kept) * 1e3)
            print(f"  {algo} {minibatch} {v}: {row['ms']:.2f} ms/step (CPU {row['cpu_ms']:.2f})", flush=True)
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algos", default="PPO,MAPPO")
    ap.add_argument("--minibatch", default="1536,8192", help="rows per minibatch step")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--variants", default="eager,loss,loss-autotune,backward,step")
    ap.add_argument("--warm-cache", action="store_true",
                    help="keep inductor's on-disk cache (default: a fresh one, so compile seconds are a first run's)")
    ap.add_argument("--compile-side", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.compile_side:
        algo, minibatch, variant = args.compile_side
        print(json.dumps(compile_side(algo, int(minibatch), variant)))
        return
    variants = args.variants.split(",")
    unknown = [v for v in variants if v != "eager" and v not in MODES]
    if unknown:
        ap.error(f"unknown --variants {unknown}; known: eager, {', '.join(MODES)}")
    print(f"learner_compile: {C.machine_line()}", flush=True)
    rows = []
    for algo in args.algos.split(","):
        for minibatch in (int(x) for x in args.minibatch.split(",")):
            results = measure(algo, minibatch, variants, args.repeats, args.warm_cache)
            eager = next((r for r in results if r["variant"] == "eager" and "ms" in r), None)
            for r in results:
                if "failed" in r:
                    rows.append([algo, f"{minibatch:,}", r["variant"], "failed", "", "", "", "", r["failed"], ""])
                    continue
                ratio = f"{eager['ms'] / r['ms']:.2f}x" if eager else "-"
                cpu_ratio = f"{eager['cpu_ms'] / r['cpu_ms']:.2f}x" if eager else "-"
                rows.append([algo, f"{minibatch:,}", r["variant"], f"{r['ms']:.2f}", f"{r['cpu_ms']:.2f}", ratio,
                             cpu_ratio, f"{r['compile_s']:.1f}", " / ".join(f"{s:.1f}" for s in r["odd_s"]),
                             f"{r['graphs']} + {r['odd_graphs']}"])
    C.print_table(["algo", "minibatch rows", "variant", "ms/step", "CPU ms/step", "eager / variant", "(CPU)",
                   "compile s (first pass)", f"first step at {ODD_SIZES[0]} / {ODD_SIZES[1]} rows, s",
                   "graphs (+ at those sizes)"], rows,
                  title=f"Learner minibatch steps, 1 thread, medians of {args.repeats} interleaved passes")


if __name__ == "__main__":
    main()
