"""marl side by side with Ray RLlib: the same tasks, one after the other, in one invocation.

    bash benchmarks/peers/setup_rllib.sh                       # once: RLlib in its own venv (benchmarks/.rllib-venv)
    nice .venv/bin/python benchmarks/peers/compare_rllib.py    # all tasks, seed 0 (about 15-20 min here)
    .venv/bin/python benchmarks/peers/compare_rllib.py --tasks cartpole,spread --seeds 3

Every run is a fresh process: marl's through benchmarks/peers/marl_tasks.py in marl's
venv, RLlib's through benchmarks/peers/rllib_tasks.py in RLlib's venv (RLlib is never
a marl dependency, and CI never runs this script). For each task and seed the
two sides run back to back (the order alternates with the seed, so a burst of
load from other processes does not always hit the same side), and this script
measures from the outside:

* process start to first result: from spawning the process to its first
  `train()` result (interpreter start, imports, Ray start-up where used, build,
  first iteration);
* time to a return of 450: process start to the first iteration whose mean
  return (over the episodes that finished in it, the same rule on both sides)
  reaches 450, and the same measured from the end of the build ("train");
* env steps/s including learning: env steps sampled / time from the end of
  the build to the last result;
* return at equal env steps: the mean of the per-iteration returns over the
  last 20 % of the env-step budget (both sides run the same budget);
* peak memory: the largest sum, over the process and all its descendants
  (Ray's GCS, raylet, workers, runner actors), of the proportional set size
  (PSS: shared pages divided among the processes that share them, so the sum
  does not count a shared library twice), sampled every 0.25 s; the RSS sum
  is printed next to it.

Tasks (--tasks, comma-separated):
  cartpole         PPO CartPole-v1 to 450, sampling in-process (RLlib: num_env_runners=0)
  cartpole_remote  the same with one remote env runner on both sides
  spread           multi-agent PPO on simple_spread (3 agents, one shared policy), one remote
                   runner (--spread-runners), --spread-steps env steps
  dqn              DQN CartPole-v1 to 450, capped at --dqn-cap seconds of training
                   ("n/a" while marl has no DQNConfig)

RLlib runs with the hyperparameters of marl's scenario (`matched`, see
rllib_tasks.py); `--rllib-config both` adds RLlib with its own defaults for
every row (the figures the issue's targets were set against).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C
from _events import parse

HERE = Path(__file__).resolve().parent
MARL_PY = Path(sys.executable)
DEFAULT_RLLIB_PY = HERE.parent / ".rllib-venv" / "bin" / "python"
TARGET_RETURN = 450.0
ALL_TASKS = ("cartpole", "cartpole_remote", "spread", "dqn")


# -- measuring one process tree ------------------------------------------------
class TreeMemory:
    """Samples the summed PSS (and RSS) of a process and all its descendants until stopped."""

    def __init__(self, pid: int, interval: float = 0.25):
        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak_pss = 0
        self.peak_rss = 0
        self.peak_procs = 0
        self._known: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "TreeMemory":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        try:
            procs = [self.root] + self.root.children(recursive=True)
        except psutil.Error:
            return
        pss = rss = 0
        alive = 0
        for p in procs:
            # Keep one Process object per pid: psutil caches what makes repeated reads cheap.
            p = self._known.setdefault(p.pid, p)
            try:
                info = p.memory_full_info()
            except psutil.AccessDenied:
                try:
                    info = p.memory_info()
                except psutil.Error:
                    continue
            except psutil.Error:
                continue
            alive += 1
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
        if pss > self.peak_pss:
            self.peak_pss, self.peak_procs = pss, alive
        self.peak_rss = max(self.peak_rss, rss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)


def kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


@dataclass
class Run:
    side: str  # "marl" | "RLlib" | "RLlib defaults"
    task: str
    seed: int
    events: list = field(default_factory=list)
    t_spawn: float = 0.0
    t_end: float = 0.0
    rc: int = 0
    peak_pss: int = 0
    peak_rss: int = 0
    peak_procs: int = 0
    log: str = ""
    load: float = math.nan  # 1-minute load average when the process started (other jobs on the machine)

    def first(self, ev: str) -> dict | None:
        return next((e for e in self.events if e["ev"] == ev), None)

    @property
    def iters(self) -> list[dict]:
        return [e for e in self.events if e["ev"] == "iter"]

    @property
    def unavailable(self) -> str | None:
        e = self.first("unavailable")
        return e["why"] if e else None

    @property
    def failed(self) -> bool:
        return self.rc != 0 or (not self.unavailable and not self.iters)

    # -- derived figures ---------------------------------------------------
    def startup_s(self) -> float:
        it = self.iters
        return it[0]["t"] - self.t_spawn if it else math.nan

    def reached(self, target: float) -> dict | None:
        return next((e for e in self.iters if e["return"] == e["return"] and e["return"] >= target), None)

    def wall_to(self, target: float) -> float:
        e = self.reached(target)
        return e["t"] - self.t_spawn if e else math.nan

    def train_to(self, target: float) -> float:
        e, built = self.reached(target), self.first("built")
        return e["t"] - built["t"] if e and built else math.nan

    def steps_to(self, target: float) -> float:
        e = self.reached(target)
        return float(e["env_steps"]) if e else math.nan

    def train_s(self) -> float:
        it, built = self.iters, self.first("built")
        return it[-1]["t"] - built["t"] if it and built else math.nan

    def env_steps(self) -> int:
        it = self.iters
        return it[-1]["env_steps"] if it else 0

    def steps_per_s(self) -> float:
        t = self.train_s()
        return self.env_steps() / t if t and t == t else math.nan

    def return_at_end(self, budget: int, share: float = 0.2) -> float:
        """Mean of the per-iteration returns over the last `share` of the env-step budget."""
        tail = [e["return"] for e in self.iters if e["env_steps"] > (1 - share) * budget and e["return"] == e["return"]]
        return sum(tail) / len(tail) if tail else math.nan


def run_process(side: str, python: Path, script: str, task_key: str, task: str, seed: int, args: list[str],
                log_dir: Path, verbose: bool) -> Run:
    cmd = [str(python), str(HERE / script), task, "--seed", str(seed), *args]
    run = Run(side, task_key, seed)
    log_path = log_dir / f"{task_key}-{side.replace(' ', '_')}-seed{seed}.log"
    run.log = str(log_path)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)  # both sides start their own local Ray
    with open(log_path, "w", buffering=1) as log:  # line-buffered: the log can be followed live
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        run.t_spawn = time.time()
        run.load = os.getloadavg()[0]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=HERE.parents[1])
        mem = TreeMemory(proc.pid).start()
        try:
            for line in proc.stdout:
                log.write(line)
                event = parse(line)
                if event is None:
                    continue
                run.events.append(event)
                if verbose and event["ev"] == "iter":
                    print(
                        f"      {side:>14} iter {event['iter']:3d}  env steps {event['env_steps']:7d}  "
                        f"return {event['return']:7.1f}  t {event['t'] - run.t_spawn:6.1f} s"
                    )
                    C.flush()
            run.rc = proc.wait()
        except BaseException:  # Ctrl-C and the like: leave no Ray processes behind
            kill_tree(proc.pid)
            raise
        finally:
            run.t_end = time.time()
            mem.stop()
    run.peak_pss, run.peak_rss, run.peak_procs = mem.peak_pss, mem.peak_rss, mem.peak_procs
    return run


# -- the table -------------------------------------------------------------
def fmt(x: float, unit: str = "", digits: int = 3) -> str:
    if x is None or x != x:
        return "-"
    return f"{C.fmt_num(x, digits)}{unit}"


def fmt_mb(b: float) -> str:
    return "-" if b != b else f"{b / 2**20:,.0f} MB"


def ratio_row(label: str, marl: list[float], rllib: list[float], unit: str, better: str, target: float | None,
              rllib_at_least: float = math.nan) -> list[str]:
    """One line of the ratio table. better='lower' (times, memory) or 'higher' (throughput).

    The ratio is always "how many times better marl is" (RLlib / marl for
    times, marl / RLlib for throughput), from the medians over seeds. When
    RLlib never got there before its cap, `rllib_at_least` (how long it ran)
    is a lower bound on its time, and the ratio becomes a lower bound too.
    """
    m, r = C.median(marl), C.median(rllib)
    r_text = fmt(r, unit)
    if better == "lower":
        ratio = r / m if m and m == m and r == r else math.nan
    else:
        ratio = m / r if r and m == m and r == r else math.nan
    shown, bound = fmt(ratio, "x"), False
    if ratio != ratio and m == m and rllib_at_least == rllib_at_least:
        ratio, bound = rllib_at_least / m, True
        shown, r_text = f"> {ratio:.1f}x", f"> {fmt(rllib_at_least, unit)} (not reached)"
    verdict = ""
    if target is not None:
        if ratio != ratio:
            verdict = "n/a"
        elif ratio >= target:
            verdict = "met"
        else:
            verdict = "not shown (RLlib capped)" if bound else "MISSED"
    tgt = "" if target is None else f">= {target:g}x"
    return [label, fmt(m, unit), r_text, shown, tgt, verdict]


def summarize(runs: list[Run], args) -> list[list[str]]:
    rows = []

    def pick(task: str, side: str) -> list[Run]:
        return [r for r in runs if r.task == task and r.side == side and not r.failed]

    def ran_for(rl: list[Run], since: str) -> float:
        """For runs that never reached 450: median seconds they ran (from spawn or from the build)."""
        if not rl or any(r.reached(TARGET_RETURN) for r in rl):
            return math.nan
        return C.median([r.iters[-1]["t"] - (r.t_spawn if since == "spawn" else r.first("built")["t"]) for r in rl])

    def against_each_rllib(task: str):
        """(marl's runs, RLlib's runs, label suffix): RLlib with marl's hyperparameters, then with its defaults."""
        marl = pick(task, "marl")
        for rlabel, suffix in (("RLlib", ""), ("RLlib defaults", " [RLlib defaults]")):
            rl = pick(task, rlabel)
            if marl and rl:
                yield marl, rl, suffix

    def startup_and_memory(label: str, marl: list[Run], rl: list[Run]) -> None:
        rows.append(ratio_row(f"{label}: process start to first result", [x.startup_s() for x in marl],
                              [x.startup_s() for x in rl], " s", "lower", 5.0))
        rows.append(ratio_row(f"{label}: peak memory, PSS summed over all processes",
                              [x.peak_pss / 2**20 for x in marl], [x.peak_pss / 2**20 for x in rl], " MB", "lower", 2.0))

    for task_key, label in (("cartpole", "PPO CartPole in-process"), ("cartpole_remote", "PPO CartPole 1 remote runner")):
        for marl, rl, suffix in against_each_rllib(task_key):
            rows.append(ratio_row(f"{label}{suffix}: wall time to 450 (from process start)",
                                  [r.wall_to(TARGET_RETURN) for r in marl], [r.wall_to(TARGET_RETURN) for r in rl],
                                  " s", "lower", 10.0, ran_for(rl, "spawn")))
            rows.append(ratio_row(f"{label}{suffix}: training time to 450 (from build)",
                                  [r.train_to(TARGET_RETURN) for r in marl], [r.train_to(TARGET_RETURN) for r in rl],
                                  " s", "lower", None, ran_for(rl, "build")))
            rows.append(ratio_row(f"{label}{suffix}: env steps to 450", [r.steps_to(TARGET_RETURN) for r in marl],
                                  [r.steps_to(TARGET_RETURN) for r in rl], "", "lower", None,
                                  C.median([r.env_steps() for r in rl]) if ran_for(rl, "spawn") == ran_for(rl, "spawn") else math.nan))
            if not suffix:
                startup_and_memory(label, marl, rl)

    for marl, rl, suffix in against_each_rllib("spread"):
        rows.append(ratio_row(f"simple_spread PPO (3 agents, shared policy){suffix}: env steps/s incl. learning",
                              [r.steps_per_s() for r in marl], [r.steps_per_s() for r in rl], "", "higher", 10.0))
        b = args.spread_steps
        m_ret, r_ret = [r.return_at_end(b) for r in marl], [r.return_at_end(b) for r in rl]
        rows.append([f"simple_spread PPO{suffix}: return at {b:,} env steps (last 20 %)", fmt(C.median(m_ret)),
                     fmt(C.median(r_ret)), "-", "", ""])
        if not suffix:
            startup_and_memory("simple_spread PPO", marl, rl)

    for marl, rl, suffix in against_each_rllib("dqn"):
        rows.append(ratio_row(f"DQN CartPole{suffix}: wall time to 450 (cap {args.dqn_cap:g} s)",
                              [r.wall_to(TARGET_RETURN) for r in marl], [r.wall_to(TARGET_RETURN) for r in rl],
                              " s", "lower", 20.0, ran_for(rl, "spawn")))
        rows.append(ratio_row(f"DQN CartPole{suffix}: env steps/s incl. learning", [r.steps_per_s() for r in marl],
                              [r.steps_per_s() for r in rl], "", "higher", None))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=",".join(ALL_TASKS), help=f"comma-separated subset of {','.join(ALL_TASKS)}")
    ap.add_argument("--seeds", type=int, default=1, help="seeds per task, from --first-seed (default 1)")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0): rerun one seed alone")
    ap.add_argument("--spread-steps", type=int, default=30_000, help="env-step budget of the simple_spread runs")
    ap.add_argument("--spread-runners", type=int, default=1, help="remote env runners in the simple_spread runs (default 1)")
    ap.add_argument("--ppo-cap", type=float, default=600.0, help="training seconds before a PPO CartPole run gives up")
    ap.add_argument("--dqn-cap", type=float, default=300.0, help="training seconds before a DQN run gives up")
    ap.add_argument("--rllib-config", choices=["matched", "both"], default="matched",
                    help="both: every row also against RLlib's default hyperparameters")
    ap.add_argument("--rllib-threads", type=int, default=None,
                    help="torch threads in RLlib's driver process (default: torch's own, 2 on this machine; marl uses 1)")
    ap.add_argument("--rllib-python", default=str(DEFAULT_RLLIB_PY), help="python of the RLlib venv")
    ap.add_argument("--log-dir", default=None, help="where each process's output goes (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write every run's events and figures to this file")
    ap.add_argument("--sides", default="marl,RLlib,RLlib defaults",
                    help="comma-separated sides to run (default all: marl,RLlib,RLlib defaults)")
    ap.add_argument("--merge", action="append", default=[], metavar="JSON",
                    help="add the runs of an earlier --json file to the table (repeatable): run one side or task "
                         "again without redoing the rest")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every iteration")
    args = ap.parse_args()
    wanted_sides = {x.strip() for x in args.sides.split(",") if x.strip()}
    if not wanted_sides <= {"marl", "RLlib", "RLlib defaults"}:
        ap.error(f"--sides: unknown side(s) {sorted(wanted_sides - {'marl', 'RLlib', 'RLlib defaults'})}")

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in ALL_TASKS]
    if unknown:
        ap.error(f"--tasks: unknown task(s) {unknown}; known: {list(ALL_TASKS)}")
    rllib_py = Path(args.rllib_python)
    if not rllib_py.exists():
        sys.exit(f"RLlib's python '{rllib_py}' does not exist: run `bash benchmarks/peers/setup_rllib.sh` first")
    if args.log_dir:
        log_dir = Path(args.log_dir)
    else:
        import tempfile

        log_dir = Path(tempfile.mkdtemp(prefix="compare_rllib-"))
    log_dir.mkdir(parents=True, exist_ok=True)

    print(f"compare_rllib: {C.machine_line()}; {psutil.virtual_memory().total / 2**30:.0f} GiB RAM")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"tasks {tasks}, seeds {list(seeds)}, logs in {log_dir}")
    C.flush()

    # (task key, marl_tasks/rllib_tasks task name, common args, extra RLlib configs)
    plans = {
        "cartpole": ("ppo_cartpole", ["--runners", "0", "--target-return", str(TARGET_RETURN), "--max-train-s", str(args.ppo_cap)]),
        "cartpole_remote": ("ppo_cartpole", ["--runners", "1", "--target-return", str(TARGET_RETURN), "--max-train-s", str(args.ppo_cap)]),
        "spread": ("ppo_spread", ["--runners", str(args.spread_runners), "--max-env-steps", str(args.spread_steps), "--max-train-s", "1800"]),
        "dqn": ("dqn_cartpole", ["--runners", "0", "--target-return", str(TARGET_RETURN), "--max-train-s", str(args.dqn_cap)]),
    }
    runs: list[Run] = [Run(**r) for path in args.merge for r in json.loads(Path(path).read_text())["runs"]]
    t_all = time.time()
    for task_key in tasks:
        name, common = plans[task_key]
        for seed in seeds:
            rl_common = common + (["--torch-threads", str(args.rllib_threads)] if args.rllib_threads else [])
            sides = [("marl", MARL_PY, "marl_tasks.py", common), ("RLlib", rllib_py, "rllib_tasks.py", rl_common)]
            if args.rllib_config == "both" and task_key in ("cartpole", "cartpole_remote", "spread", "dqn"):
                sides.append(("RLlib defaults", rllib_py, "rllib_tasks.py", rl_common + ["--config", "defaults"]))
            sides = [x for x in sides if x[0] in wanted_sides]
            if seed % 2 == 1:
                sides.reverse()
            for side, python, script, extra in sides:
                print(f"  {task_key} seed {seed}: {side} ...", end=" " if not args.verbose else "\n")
                C.flush()
                run = run_process(side, python, script, task_key, name, seed, extra, log_dir, args.verbose)
                runs.append(run)
                print(describe(run))
                C.flush()

    print_runs(runs)
    rows = summarize(runs, args)
    C.print_table(["figure (median over seeds)", "marl", "RLlib", "marl better by", "target", "verdict"], rows,
                  title="marl vs RLlib: ratios (times and memory: RLlib / marl; throughput: marl / RLlib)")
    print(f"\ntotal {time.time() - t_all:.0f} s; load avg now {os.getloadavg()[0]:.2f}; each process's output in {log_dir}")
    if args.json:
        data = [{**{k: getattr(r, k) for k in ("side", "task", "seed", "t_spawn", "t_end", "rc", "peak_pss", "peak_rss",
                                                  "peak_procs", "log", "load")}, "events": r.events} for r in runs]
        Path(args.json).write_text(json.dumps({"machine": C.machine_line(), "args": vars(args), "runs": data,
                                               "table": rows}, indent=1))


def describe(run: Run) -> str:
    if run.unavailable:
        return f"n/a ({run.unavailable})"
    if run.failed:
        return f"FAILED (exit {run.rc}; see {run.log})"
    done = run.first("done")
    return (
        f"{run.env_steps():,} env steps, first result {run.startup_s():.1f} s, "
        f"{run.steps_per_s():,.0f} env steps/s, peak {fmt_mb(run.peak_pss)} PSS in {run.peak_procs} processes; "
        f"{done['reason'] if done else 'no done event'}"
    )


def print_runs(runs: list[Run]) -> None:
    rows = []
    for r in runs:
        if r.unavailable or r.failed:
            rows.append([f"{r.task} seed {r.seed}", r.side, f"{r.load:.1f}", r.unavailable or f"failed ({r.rc})",
                         "", "", "", "", "", "", ""])
            continue
        built = r.first("built")
        rows.append([
            f"{r.task} seed {r.seed}", r.side, f"{r.load:.1f}",
            fmt(built["t"] - r.t_spawn if built else math.nan, " s"),
            fmt(r.startup_s(), " s"),
            fmt(r.wall_to(TARGET_RETURN), " s"),
            f"{r.env_steps():,}",
            fmt(r.steps_per_s()),
            fmt(r.iters[-1]["return"]),
            fmt_mb(r.peak_pss), f"{fmt_mb(r.peak_rss)} / {r.peak_procs}",
        ])
    C.print_table(["run", "side", "load", "built", "first result", "to 450", "env steps", "env steps/s", "last return",
                   "peak PSS", "peak RSS / procs"], rows, title="Runs (times from process start)")


if __name__ == "__main__":
    main()
