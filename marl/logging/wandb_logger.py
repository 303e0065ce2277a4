"""Weights & Biases: a run's resolved config, every metric against env steps, its final checkpoint.

Enabled with `loggers.wandb: true`; `loggers.wandb_mode: offline` writes RUN_DIR/wandb
only (no network; `wandb sync RUN_DIR/wandb/offline-run-*` uploads it later). Metrics
are plotted against `env_steps_total` (`define_metric`), so a resumed run's rows line
up; a resumed run continues the same W&B run (its id is kept in RUN_DIR/loggers.json).
"""

from __future__ import annotations

from pathlib import Path

from marl.errors import ConfigError

STEP_KEY = "env_steps_total"


class WandbLogger:
    def __init__(self, run_dir: Path, config: dict, settings, run_id: str | None = None):
        try:
            import wandb
        except ImportError:
            raise ConfigError("loggers.wandb needs the wandb package: pip install 'marl[wandb]'") from None
        self.wandb = wandb
        self.run = wandb.init(
            project=settings.wandb_project, entity=settings.wandb_entity, group=settings.wandb_group,
            mode=settings.wandb_mode, dir=str(run_dir), name=run_dir.name, config=config,
            id=run_id, resume="allow" if run_id else None, reinit="create_new",
            settings=wandb.Settings(silent=True, console="off"),
        )
        self.run_id = self.run.id
        self.run.define_metric(STEP_KEY)
        self.run.define_metric("*", step_metric=STEP_KEY)

    def log(self, row: dict, step: int) -> None:
        self.run.log({k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})

    def log_checkpoint(self, path: Path) -> None:
        artifact = self.wandb.Artifact(f"checkpoint-{self.run.id}", type="model")
        artifact.add_dir(str(path))
        self.run.log_artifact(artifact)

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "finished" else 1)
