"""`marl evaluate CHECKPOINT --record DIR`: whole evaluation episodes, written in the offline format.

A runner of its own (the evaluation runners' config, in-process) plays with the
checkpoint's weights until the first `episodes` episodes it started are over;
their rows, and only theirs, are written (per policy, as `offline.output`
writes). The rows wait in memory until then, so a recording holds whole
episodes and no episode is favoured for being short.
"""

from __future__ import annotations

import numpy as np

from marl.algorithms.algorithm_config import RECORDED_COLUMNS
from marl.data import sample_batch as sb
from marl.runtime.evaluation import EVALUATION_FIRST_INDEX
from marl.offline.writer import OfflineWriter
from marl.runners.env_runner import EnvRunner


def record_episodes(algo, episodes: int, output, explore: bool = False, max_file_mb: float | None = None) -> dict:
    """Plays and records `episodes` episodes; returns {episodes, rows, files, episode_return_mean, ...}."""

    if int(episodes) < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    cfg = algo.config.evaluation_runner_config()
    cfg.offline_cfg.output = str(output)  # runners then record log-probs and next observations
    cfg.env_runners_cfg.num_env_runners = 0
    # Only what recording keeps: greedy acting (forward_inference) computes no values for PPO's columns.
    cfg.runner_columns = lambda policy_id: RECORDED_COLUMNS
    weights = algo.learners.get_weights()
    runner = EnvRunner(cfg, EVALUATION_FIRST_INDEX)
    try:
        runner.set_weights(weights)
        kept, finished, first = [], {}, None
        while True:
            record = runner.sample(explore=explore)
            ids = [b[sb.EPS_ID] for b in record.batch.policy_batches.values() if len(b)]
            if first is None and ids:
                first = int(min(i.min() for i in ids))
            kept.append(record)
            finished.update({e["episode_id"]: e for e in record.episodes})
            if first is not None and all(first + i in finished for i in range(episodes)):
                break
    finally:
        runner.stop()
    wanted = range(first, first + episodes)
    mb = max_file_mb if max_file_mb is not None else cfg.offline_cfg.output_max_file_mb
    writer = OfflineWriter(output, runner.possible_agents, int(mb * (1 << 20)), cfg.offline_cfg.output_compression)
    rows = 0
    for record in kept:
        picked = {}
        for pid, batch in record.batch.policy_batches.items():
            ids = batch[sb.EPS_ID]
            keep = (ids >= wanted.start) & (ids < wanted.stop)
            if keep.any():
                picked[pid] = batch.take(np.flatnonzero(keep))
        rows += writer.write(picked, weights["version"])
    files = writer.close()
    returns = [finished[i]["return"] for i in wanted]
    return {
        "episodes": episodes, "rows": rows, "files": [str(f) for f in files],
        "episode_return_mean": float(np.mean(returns)), "episode_return_min": float(np.min(returns)),
        "episode_len_mean": float(np.mean([finished[i]["length"] for i in wanted])),
    }
