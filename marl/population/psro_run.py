"""A PSRO run into a run directory: what `marl train` does with a scenario that has a `psro:` section.

    run_dir/
      config.yaml        the resolved config, its psro section included
      result.jsonl       one row per PSRO epoch: iteration (= epoch + 1), env_steps_total (the best
                         responses' env steps), psro/nash_conv, psro/meta/<member>, league/rating/<member>, ...
      population/        PSRO.save after every epoch: `marl league RUN_DIR` draws it, `--resume` goes on from it

The run stops after `psro.epochs` epochs; `marl train --resume RUN_DIR` restores the population and runs
the epochs still missing (`psro.epochs=N` raises the target).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable

from marl.errors import ConfigError
from marl.logging.run_dir import RunLogger
from marl.population.psro import PSRO

POPULATION_DIR = "population"


def psro_line(result: dict, epochs: int) -> str:
    nash_conv = result.get("psro/nash_conv", math.nan)
    return (f"epoch {result['psro/epoch'] + 1}/{epochs}  population {result['psro/population']}  "
            f"nash_conv {nash_conv:.4f}  best-response env steps {result['psro/best_response_env_steps']}  "
            f"({result['psro/epoch_seconds']:.1f} s)")


def psro_run(config, run_dir: str | os.PathLike, *, resume: bool = False, echo: Callable[[str], None] | None = print,
             progress: Callable[[dict], None] | None = None) -> str:
    """Runs `config.psro_cfg.epochs` PSRO epochs (the rest of them with `resume`), logging into `run_dir`."""
    if config.psro_cfg is None:
        raise ConfigError("psro_run needs a config with a psro section (a scenario's psro: or config.psro(...))")
    say = echo or (lambda line: None)
    epochs = config.psro_cfg.epochs
    run_dir = Path(run_dir)
    population = run_dir / POPULATION_DIR
    psro = PSRO.from_config(config)  # every setting checked against the config, in one line, before any training
    resume_from = None
    if resume:
        if not (population / "population.json").is_file():
            raise ConfigError(f"cannot resume '{run_dir}': it has no {POPULATION_DIR}/population.json yet (no PSRO epoch finished)")
        psro.restore(population)
        resume_from = {"iteration": len(psro.history), "env_steps_total": psro.env_steps}
        say(f"resumed from {population} at epoch {len(psro.history)}, population {len(psro.members)}")
    logger = RunLogger(run_dir, config.to_dict(), resume_from=resume_from)
    status = "failed"
    try:
        while len(psro.history) < epochs:
            result = psro.step()
            psro.save(population)
            row = {"iteration": len(psro.history), "env_steps_total": psro.env_steps, **result}
            logger.log(row)
            (progress or (lambda r: say(psro_line(r, epochs))))(row)
        status = "finished"
        return f"psro.epochs {epochs} reached"
    except KeyboardInterrupt:
        status = "interrupted"
        say(f"interrupted; the population after the last whole epoch is in {population} (continue with --resume {run_dir})")
        raise
    finally:
        psro.stop()
        logger.close(status)
