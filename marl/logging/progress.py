"""The one-line progress display `marl train` prints after each iteration.

    iter   12  env_steps   24576  return  187.3  env_steps/s  5230  elapsed 0:00:21  stop: return 187.3/450 (42%) | env_steps 24576/100000 (25%)

Progress toward each configured stop criterion is shown; the run stops at the first one met.
An iteration in which no episode finished (VMAS scenarios without `max_steps`, long episodes)
has no return to show: the line says `return: no episode finished yet` (none in the run so far)
or `return: no episode finished this iteration`, never `nan`. An offline run (BC, MARWIL, CQL) samples no
episodes: it shows its evaluation's return, `return (evaluation) 187.3`, or `return: offline, no
evaluation this iteration`. Toward a return target at or below 0 the stop part shows the distance
(`return -1357.8/-200.0 (1157.8 to go)`), not a share.
In a zero-sum game (chess, connect four self-play) the summed return is always 0, so the
line adds each policy's own mean return: `return 0.0 (main +0.42 | main_v3 -0.42)`.
"""

from __future__ import annotations

import math


def _num(value, spec: str = ".1f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    return format(value, spec)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


NO_EPISODE_YET = "no episode finished yet"
NO_EPISODE_THIS_ITERATION = "no episode finished this iteration"
OFFLINE_NO_EVALUATION = "offline, no evaluation this iteration"
EVALUATION_RETURN = "evaluation/episode_return_mean"
OFFLINE_ROWS = "counters/offline/rows_read"  # only offline runs (BC, MARWIL, CQL) read rows


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def missing_return(result: dict) -> str | None:
    """Why an iteration's result has no mean return to show, or None when it has one (its own, or its evaluation's).

    Only a result that counts its episodes (`episodes_this_iter`, `episodes_total`) says so; a result
    without the counts keeps showing its number (or nan). An offline run samples no episodes: its returns
    are its evaluations'."""
    if _is_number(result.get("episode_return_mean")) or _is_number(result.get(EVALUATION_RETURN)):
        return None
    if OFFLINE_ROWS in result:
        return OFFLINE_NO_EVALUATION
    if result.get("episodes_total") == 0:
        return NO_EPISODE_YET
    if result.get("episodes_this_iter") == 0:
        return NO_EPISODE_THIS_ITERATION
    return None


def return_field(result: dict) -> str:
    """'return   187.3', 'return (evaluation) 187.3' when only an evaluation has one (offline runs), or
    'return: no episode finished yet' when there is no return to show."""
    missing = missing_return(result)
    if missing:
        return f"return: {missing}"
    evaluated = evaluation_only_return(result)
    if evaluated is not None:
        return f"return (evaluation) {_num(evaluated)}"
    return f"return {_num(result.get('episode_return_mean')):>7}"


def evaluation_only_return(result: dict) -> float | None:
    """The evaluation's mean return of a result without one of its own (offline runs), else None."""
    if _is_number(result.get("episode_return_mean")) or not _is_number(result.get(EVALUATION_RETURN)):
        return None
    return result[EVALUATION_RETURN]


def _return_progress(value: float, target: float) -> str:
    """A share of a positive target; toward a target at or below 0 (Pendulum's -200) a share says nothing, so
    the distance still to go."""
    if value >= target:
        return "met"
    if target > 0:
        return f"{max(0.0, value / target):.0%}"
    return f"{target - value:.1f} to go"


def stop_progress(result: dict, stop_cfg) -> str:
    """'return 187.3/450 (42%) | env_steps ...' for each stop criterion that is set."""
    parts = []

    def add(name: str, value, target, spec: str):
        if target is None:
            return
        if value is None or (isinstance(value, float) and math.isnan(value)):
            shown = "-" if name == "return" and missing_return(result) else "nan"
            parts.append(f"{name} {shown}/{target:{spec}}")
            return
        if name == "return":
            parts.append(f"{name} {value:{spec}}/{target:{spec}} ({_return_progress(value, target)})")
            return
        share = max(0.0, min(1.0, value / target)) if target else 1.0
        parts.append(f"{name} {value:{spec}}/{target:{spec}} ({share:.0%})")

    windowed = getattr(stop_cfg, "episode_return_window", 0)  # the return the stop rule reads (stop.episode_return_window)
    add("return", result.get("episode_return_window_mean" if windowed else "episode_return_mean"), stop_cfg.episode_return_mean, ".1f")
    add("env_steps", result.get("env_steps_total"), stop_cfg.env_steps_total, "d")
    add("time_s", result.get("time_total_s"), stop_cfg.time_total_s, ".0f")
    add("iterations", result.get("iteration"), stop_cfg.iterations, "d")
    return " | ".join(parts) if parts else "none set (Ctrl-C stops and checkpoints)"


def zero_sum_returns(result: dict, most: int = 4) -> str:
    """' (main +0.42 | main_v1 -0.42)' when the summed return says nothing (zero-sum games: always 0) and
    the policies' own returns do; else ''."""
    prefix = "policy_return_mean/"
    per_policy = {k[len(prefix):]: v for k, v in result.items() if k.startswith(prefix) and isinstance(v, (int, float)) and v == v}
    total = result.get("episode_return_mean")
    if len(per_policy) < 2 or total is None or total != total:
        return ""
    scale = max(abs(v) for v in per_policy.values())
    if scale == 0 or abs(total) > 1e-6 * max(1.0, scale):
        return ""
    shown = sorted(per_policy.items(), key=lambda kv: -abs(kv[1]))[:most]
    return " (" + " | ".join(f"{pid} {v:+.2f}" for pid, v in shown) + ")"


def progress_line(result: dict, stop_cfg) -> str:
    return (
        f"iter {result['iteration']:4d}  env_steps {result['env_steps_total']:8d}  "
        f"{return_field(result)}{zero_sum_returns(result)}  "
        f"env_steps/s {_num(result.get('env_steps_per_s'), '.0f'):>6}  "
        f"elapsed {_clock(result.get('time_total_s', 0.0))}  "
        f"stop: {stop_progress(result, stop_cfg)}"
    )
