"""Sampling throughput with 0, 1, 2 remote env runners on simple_spread, the cost of one remote
sample call, its payload, and the learner's time per env step: the figures that say how marl
scales on a cluster and where it stops.

    .venv/bin/python benchmarks/speed/scale.py [--seconds 10] [--runners 0,1,2] [--envs 8] [--fragment 256]

Measured (simple_spread_v3, N=3, 25 cycles, one policy shared by the 3 agents; the
scenario's network, 128x128):

1. env steps/s of sampling alone, as the driver receives them, with 0 remote runners
   (the in-process runner), 1 and 2 (Ray actors): synchronous rounds (every runner
   samples one fragment, the driver waits for all: the PPO graph's `sample(sync)`),
   and asynchronous (`gather_async`, 2 requests in flight per runner: the runner
   samples its next fragment while the driver takes the last one);
2. the round trip of a Ray actor call that does nothing (`ping`), and of a remote
   `sample()` of one step of one env against the same call in-process: the fixed
   cost of one remote sample call;
3. the payload of one fragment (bytes of its NumPy columns, bytes per env step), the
   driver's time to fetch one from the object store (`ray.get` of a finished
   fragment, 1 runner, median) and to concatenate two;
4. the learner's time per env step (one PPO update of a 2048-env-step batch with the
   scenario's 5 epochs of 512-row minibatches), which no number of runners shortens, with
   the learner in-process, on one Ray actor, and on 2 data-parallel actors (DDP).

The last table turns these into the throughput to expect from N runners (one core
each) and where it stops growing; benchmarks/README.md explains it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl
from marl.execution import SharedMetrics, gather_async
from marl.runners import EnvRunner, EnvRunnerGroup

SCENARIO = str(C.REPO_ROOT / "scenarios" / "simple_spread_ppo.yaml")


def config(num_runners: int, envs: int, fragment: int, seed: int = 0):
    cfg = marl.load_scenario(SCENARIO)
    cfg.env_runners(num_env_runners=num_runners, num_envs_per_env_runner=envs, rollout_fragment_length=fragment)
    cfg.debugging(seed=seed)
    cfg.validate()
    return cfg


def sync_rate(group: EnvRunnerGroup, seconds: float) -> float:
    group.call_all("sample")  # warm-up round
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        steps += sum(b.env_steps for b in group.call_all("sample"))
    return steps / (time.perf_counter() - t0)


def async_rate(group: EnvRunnerGroup, seconds: float, num_async: int = 2) -> float:
    it = gather_async(group, SharedMetrics(), num_async)
    next(it)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        steps += next(it)[1].env_steps
    rate = steps / (time.perf_counter() - t0)
    # drain what is still in flight so the next measurement starts clean
    import ray

    ray.get([a.ping.remote() for a in group.remote])
    return rate


def call_overheads(cfg_tiny, repeats: int) -> dict:
    """Round trips (µs, median): a no-op actor call, a one-step sample remote and in-process."""
    import ray

    group = EnvRunnerGroup(cfg_tiny)
    actor = group.remote[0]
    local = EnvRunner(cfg_tiny, 0)
    try:
        for _ in range(20):  # warm-up
            ray.get(actor.ping.remote())
            ray.get(actor.sample.remote())
            local.sample()

        def median_us(fn):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return statistics.median(times) * 1e6

        out = {"ping": median_us(lambda: ray.get(actor.ping.remote()))}
        remote_s, local_s = [], []
        for _ in range(repeats):  # interleaved, so load hits both alike
            t0 = time.perf_counter()
            ray.get(actor.sample.remote())
            remote_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            local.sample()
            local_s.append(time.perf_counter() - t0)
        out["sample_remote"] = statistics.median(remote_s) * 1e6
        out["sample_local"] = statistics.median(local_s) * 1e6
        return out
    finally:
        group.stop()
        local.stop()


def payload_figures(cfg_one, repeats: int) -> dict:
    import pickle

    import ray

    from marl.data import MultiAgentBatch

    group = EnvRunnerGroup(cfg_one)
    actor = group.remote[0]
    try:
        ray.get(actor.sample.remote())
        gets, batches = [], []
        for _ in range(repeats):
            ref = actor.sample.remote()
            ray.wait([ref])  # finished: what remains is the fetch
            t0 = time.perf_counter()
            batch = ray.get(ref)
            gets.append(time.perf_counter() - t0)
            batches.append(batch)
        b = batches[-1]
        t0 = time.perf_counter()
        for _ in range(repeats):
            MultiAgentBatch.concat(batches[:2])
        concat_s = (time.perf_counter() - t0) / repeats
        return {
            "env_steps": b.env_steps,
            "agent_rows": b.agent_steps(),
            "column_bytes": b.size_bytes(),
            "pickled_bytes": len(pickle.dumps(b, protocol=5)),
            "get_s": statistics.median(gets),
            "concat2_s": concat_s,
        }
    finally:
        group.stop()


def learner_seconds_per_step(cfg, repeats: int, num_learners: int = 0) -> tuple[float, int]:
    """(median seconds per env step of one PPO update of a train batch, weights bytes), with `num_learners` learners."""
    from marl.data import MultiAgentBatch
    from marl.learners import LearnerGroup

    runner = EnvRunner(cfg, 0)
    cfg = cfg.copy()
    cfg.learners(num_learners=num_learners)
    group = LearnerGroup(cfg, runner.specs)
    parts, steps = [], 0
    while steps < cfg.training_cfg.train_batch_size:
        parts.append(runner.sample().batch)
        steps += parts[-1].agent_steps()  # train_batch_size counts agent steps
    batch = MultiAgentBatch.concat(parts)
    runner.stop()
    try:
        weight_bytes = sum(v.nbytes for state in group.get_weights()["modules"].values() for v in state.values())
        group.update(batch)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            group.update(batch)
            times.append(time.perf_counter() - t0)
    finally:
        group.stop()
    return statistics.median(times) / batch.env_steps, weight_bytes


def args_learners(args) -> list[int]:
    values = [int(x) for x in args.learners.split(",")]
    return values if 0 in values else [0] + values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per throughput measurement (default 10)")
    ap.add_argument("--runners", default="0,1,2", help="remote runner counts to measure (default 0,1,2)")
    ap.add_argument("--envs", type=int, default=8, help="env copies per runner (default 8)")
    ap.add_argument("--fragment", type=int, default=256, help="rollout_fragment_length (default 256)")
    ap.add_argument("--repeats", type=int, default=50, help="repeats of the per-call measurements (default 50)")
    ap.add_argument("--learners", default="0,1,2", help="num_learners values to time one update with (default 0,1,2)")
    ap.add_argument("--network-gbit", type=float, default=10.0,
                    help="network bandwidth assumed between nodes in the model (default 10 Gbit/s)")
    args = ap.parse_args()
    counts = [int(x) for x in args.runners.split(",")]

    print(f"scale benchmark: {C.machine_line()}")
    print(f"simple_spread_v3 N=3, shared policy, {args.envs} envs x {args.fragment} steps per fragment "
          f"({args.envs * args.fragment} env steps); {args.seconds:g} s per throughput figure")
    C.flush()

    from marl.execution.ray_init import ensure_ray

    ensure_ray(max(os.cpu_count() or 1, max(counts) + 1))

    rows, rates = [], {}
    for n in counts:
        cfg = config(n, args.envs, args.fragment)
        group = EnvRunnerGroup(cfg)
        try:
            rs = sync_rate(group, args.seconds)
            ra = async_rate(group, args.seconds) if n > 0 else float("nan")
        finally:
            group.stop()
        rates[n] = (rs, ra)
        base = rates[counts[0]][0]
        rows.append([f"{n} remote" if n else "0 (in-process)", f"{rs:,.0f}", "-" if n == 0 else f"{ra:,.0f}",
                     f"{rs / base:.2f}", "-" if n == 0 else f"{max(rs, ra) / base:.2f}"])
        print(f"  {n} runners: sync {rs:,.0f} env steps/s, async {ra:,.0f}")
        C.flush()
    C.print_table(["env runners", "sync env steps/s", "async (2 in flight) env steps/s", "sync vs first", "best vs first"],
                  rows, title=f"Sampling throughput at the driver ({os.cpu_count()} CPU cores on this machine)")

    tiny = config(1, 1, 1)
    ov = call_overheads(tiny, args.repeats)
    one = config(1, args.envs, args.fragment)
    pay = payload_figures(one, max(10, args.repeats // 5))
    learn_by_n = {n: learner_seconds_per_step(config(0, args.envs, args.fragment), 3, n) for n in args_learners(args)}
    learn_s, weight_bytes = learn_by_n[0]
    C.print_table(
        ["figure", "value"],
        [
            ["no-op actor call round trip (ping)", f"{ov['ping']:,.0f} us"],
            ["remote sample() of 1 env x 1 step, round trip", f"{ov['sample_remote']:,.0f} us"],
            ["the same sample() in-process", f"{ov['sample_local']:,.0f} us"],
            ["=> fixed cost of one remote sample call", f"{ov['sample_remote'] - ov['sample_local']:,.0f} us"],
            ["fragment: env steps / agent rows", f"{pay['env_steps']:,} / {pay['agent_rows']:,}"],
            ["fragment payload: NumPy columns / pickled", f"{pay['column_bytes'] / 1e3:,.0f} kB / {pay['pickled_bytes'] / 1e3:,.0f} kB"],
            ["payload per env step", f"{pay['column_bytes'] / pay['env_steps']:,.0f} B"],
            ["driver: ray.get of a finished fragment", f"{pay['get_s'] * 1e3:.2f} ms ({pay['get_s'] / pay['env_steps'] * 1e6:.2f} us/env step)"],
            ["driver: concat of two fragments", f"{pay['concat2_s'] * 1e3:.2f} ms"],
            ["weights sent to the runners per sync (put once, read once per node)", f"{weight_bytes / 1e3:,.0f} kB"],
        ]
        + [
            [f"learner: PPO update time per env step, num_learners={n}", f"{t * 1e6:.0f} us ({1 / t:,.0f} env steps/s of learning)"]
            for n, (t, _) in learn_by_n.items()
        ],
        title="Costs of remote sampling and of learning",
    )

    # The model: N runners, one core each, synchronous PPO (sample round, then learn).
    per_runner = rates.get(1, rates[counts[-1]])[0]
    local = rates.get(0, (per_runner,))[0]
    # Driver time per env step: fetch + concat measured here (one node), plus the payload's transfer
    # over the network when the runner is on another node.
    wire_s = pay["pickled_bytes"] / pay["env_steps"] / (args.network_gbit * 1.25e8)
    driver_s = pay["get_s"] / pay["env_steps"] + pay["concat2_s"] / (2 * pay["env_steps"]) + wire_s
    model_rows = []
    for n in (1, 2, 4, 8, 16, 32, 64, 128):
        sampling = n * per_runner  # what N runners can produce
        ingest = 1 / driver_s  # what the driver can take in
        sample_rate = min(sampling, ingest)
        with_learning = 1 / (1 / sample_rate + learn_s)  # sync PPO: sampling and learning alternate
        overlapped = min(sample_rate, 1 / learn_s)  # async (APPO/IMPALA-style): they overlap
        model_rows.append([n, f"{sampling:,.0f}", f"{sample_rate:,.0f}", f"{with_learning:,.0f}", f"{overlapped:,.0f}"])
    C.print_table(
        ["runners N", "N x one runner", "sampling (driver-capped)", "sync PPO incl. learning", "async, learning overlapped"],
        model_rows,
        title=f"Expected env steps/s on N nodes (one runner {per_runner:,.0f}/s measured with 1 remote runner; "
        f"in-process {local:,.0f}/s; driver {driver_s * 1e6:.2f} us per env step incl. {wire_s * 1e6:.2f} us on a "
        f"{args.network_gbit:g} Gbit/s network; learner {learn_s * 1e6:.0f} us per env step)",
    )
    import ray

    ray.shutdown()


if __name__ == "__main__":
    main()
