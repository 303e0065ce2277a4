"""The live progress display of `marl train` and `marl experiment` (rich), or plain lines off a terminal.

On a terminal (stdout is a TTY) one row per run, redrawn in place:

    spread/PPO/seed_0  ━━━━━━━━━━━╺━━━━━━  62%  env_steps 31744  return  -61.2  1523 steps/s  0:00:21  ETA 0:00:13

progress is the closest stop criterion's share (env steps for `marl experiment`'s budget),
ETA is rich's estimate from the recent rate. Messages (run directory, stop reason) print
above the rows. Elsewhere (CI logs, a pipe) each iteration is one plain line, as
`marl.logging.progress.progress_line` writes it, prefixed with the run's name when
several runs share the display.
"""

from __future__ import annotations

import math
import sys
from typing import TextIO

from marl.logging.progress import _num, evaluation_only_return, missing_return, progress_line


def stop_share(result: dict, stop_cfg) -> float:
    """How far the run is toward its closest stop criterion, 0..1 (0 when none is set)."""
    shares = []
    for key, target in (("episode_return_mean", stop_cfg.episode_return_mean), ("env_steps_total", stop_cfg.env_steps_total),
                        ("time_total_s", stop_cfg.time_total_s), ("iteration", stop_cfg.iterations)):
        value = result.get(key)
        if target is None or value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if key == "episode_return_mean" and target <= 0:
            continue  # a negative target has no meaningful share
        shares.append(max(0.0, min(1.0, value / target)) if target else 1.0)
    return max(shares, default=0.0)


def _live_return(result: dict) -> str:
    """The return column: the number, or why there is none (no episode finished)."""
    missing = missing_return(result)
    if missing:
        return missing.replace("no episode finished", "no episode")
    evaluated = evaluation_only_return(result)
    return f"{_num(evaluated)} (evaluation)" if evaluated is not None else _num(result.get("episode_return_mean"))


class ProgressDisplay:
    """Per-run progress: a rich live table on a terminal, plain lines elsewhere.

    `update(name, result, stop_cfg)` after each iteration, `message(line)` for anything
    else, `finish(name, status)` when a run ends, `close()` at the end (also a context manager).
    """

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None, prefix_names: bool = False):
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.prefix_names = prefix_names
        self._tasks: dict[str, int] = {}
        self._progress = None
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            console = Console(file=self.stream, force_terminal=True)
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(bar_width=24), TaskProgressColumn(),
                TextColumn("env_steps {task.fields[env_steps]:>9}"), TextColumn("return {task.fields[ret]:>8}"),
                TextColumn("{task.fields[rate]:>7} steps/s"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
                console=console, refresh_per_second=4, transient=False,
            )
            self._progress.start()

    def _task(self, name: str) -> int:
        if name not in self._tasks:
            self._tasks[name] = self._progress.add_task(name, total=1.0, env_steps="-", ret="-", rate="-", status="")
        return self._tasks[name]

    def start(self, name: str) -> None:
        """Shows a run before its first result (live mode)."""
        if self._progress is not None:
            self._task(name)

    def update(self, name: str, result: dict, stop_cfg) -> None:
        if self._progress is None:
            line = progress_line(result, stop_cfg)
            print(f"[{name}] {line}" if self.prefix_names else line, file=self.stream, flush=True)
            return
        self._progress.update(
            self._task(name), completed=stop_share(result, stop_cfg), env_steps=result.get("env_steps_total", "-"),
            ret=_live_return(result), rate=_num(result.get("env_steps_per_s"), ".0f"),
        )

    def finish(self, name: str, status: str) -> None:
        if self._progress is None:
            if self.prefix_names:
                print(f"[{name}] {status}", file=self.stream, flush=True)
            return
        task = self._task(name)
        done = status.startswith("finished") or status.startswith("skipped")
        self._progress.update(task, status=status, **({"completed": 1.0} if done else {}))
        self._progress.stop_task(task)

    def message(self, line: str) -> None:
        if self._progress is None:
            print(line, file=self.stream, flush=True)
        else:
            self._progress.console.print(line, markup=False, highlight=False)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> "ProgressDisplay":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
