"""Bytes per sampled row of recurrent policies: this tree against a baseline git ref, side by side.

Each tree samples the same seeded fragments in a fresh process and reports the
policy batch's bytes per row (all columns and tables), the part that is module
state, and the pickled payload per row (what a remote runner puts in Ray's object
store). Tasks: the Stateless CartPole LSTM scenario (64-unit LSTM actor and
critic, max_seq_len 32) and the recall task with PPO-LSTM and QMIX-GRU (their
sequence-replay rows too).

    python benchmarks/speed/recurrent_state.py                     # this tree vs main
    python benchmarks/speed/recurrent_state.py --baseline-ref f2cba48
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
from _common import REPO_ROOT, print_table

TASKS = ("stateless_cartpole_lstm", "recall_ppo_lstm", "recall_qmix_gru")


def _config(task: str):
    import marl
    from marl.config.compose import load_scenario

    if task == "stateless_cartpole_lstm":
        return load_scenario(str(REPO_ROOT / "scenarios/stateless_cartpole_lstm.yaml"))
    recall = {"num_cues": 4, "delay": 4}
    if task == "recall_ppo_lstm":
        return (marl.PPOConfig().environment("marl.envs.memory", env_config=recall)
                .env_runners(num_envs_per_env_runner=8, rollout_fragment_length=24)
                .multi_agent(policies={"p0": {}, "p1": {}}, policy_mapping_fn={"agent_0": "p0", "agent_1": "p1"})
                .training(model={"hiddens": [32], "recurrent": "lstm", "cell_size": 32, "max_seq_len": 8})
                .debugging(seed=1))
    return (marl.QMIXConfig().environment("marl.envs.memory", env_config=recall)
            .env_runners(num_envs_per_env_runner=8, rollout_fragment_length=12)
            .training(model={"hiddens": [32], "recurrent": "gru", "cell_size": 32, "max_seq_len": 8})
            .debugging(seed=1))


def measure(task: str, fragments: int = 4) -> dict:
    """(run inside the tree being measured) bytes per row of `fragments` concatenated sample calls."""
    from marl.data import SampleBatch
    from marl.runners import EnvRunner

    config = _config(task)
    config.validate()
    runner = EnvRunner(config)
    samples = [runner.sample() for _ in range(fragments)]
    pid = next(iter(samples[0].batch.policy_batches))
    batch = SampleBatch.concat([s.batch[pid] for s in samples])
    n = len(batch)
    state = sum(v.nbytes for k, v in batch.columns.items() if k.startswith("state_in"))
    state += sum(t.nbytes for k, t in getattr(batch, "tables", {}).items() if k.startswith("state_in"))
    out = {"rows": n, "bytes_per_row": batch.size_bytes() / n, "state_bytes_per_row": state / n,
           "pickled_per_row": sum(len(pickle.dumps(s.batch, protocol=5)) for s in samples)
           / sum(s.batch.agent_steps() for s in samples)}  # every policy's rows
    if task == "recall_qmix_gru":  # one replay row per chunk of joint steps
        from marl.replay.sequences import joint_sequences

        chunks = joint_sequences(batch, [0, 1], 8, ["h"])
        out["replay_bytes_per_chunk"] = chunks.size_bytes() / len(chunks)
    return out


def _run_tree(tree: Path) -> dict:
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); import recurrent_state as r; "
            f"print(json.dumps({{t: r.measure(t) for t in {TASKS!r}}}))")
    script_dir = Path(__file__).resolve().parent  # this tree's script (and, through _path, its helpers)
    done = subprocess.run([sys.executable, "-c", code.replace("'benchmarks'", repr(str(script_dir)))], cwd=tree,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"measuring {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-ref", default="main", help="git ref to compare with (a temporary worktree)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.baseline_ref], cwd=REPO_ROOT, check=True)
        try:
            before = _run_tree(base)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO_ROOT, check=False)
    after = _run_tree(REPO_ROOT)
    rows = []
    for task in TASKS:
        b, a = before[task], after[task]
        for key in ("bytes_per_row", "state_bytes_per_row", "pickled_per_row", "replay_bytes_per_chunk"):
            if key in a and key in b:
                rows.append([task, key, f"{b[key]:.0f}", f"{a[key]:.0f}", f"{b[key] / max(a[key], 1e-9):.2f}x"])
    print_table(["task", "figure", args.baseline_ref, "this tree", "baseline / this"], rows,
                title=f"bytes per sampled row ({after[TASKS[0]]['rows']} rows for {TASKS[0]})")


if __name__ == "__main__":
    main()
