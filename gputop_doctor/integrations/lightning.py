"""``DoctorCallback`` for Lightning: the probe and the node's findings, in the trainer's loggers.

::

    from gputop_doctor.integrations.lightning import DoctorCallback
    trainer = lightning.Trainer(callbacks=[DoctorCallback(every_n_steps=50)], ...)

Nothing in the model or the loop changes. The steps are timed from Lightning's own hooks (the
time from one batch's end to the next one's start is the wait for data); validation pauses the
clock, so evaluation is not counted as waiting. Every ``every_n_steps`` steps the callback logs
``doctor/steps_per_s``, ``doctor/data_wait_pct`` and the findings (see
:mod:`gputop_doctor.integrations.doctor`) to every logger of the trainer, and the findings as
text to the loggers that take text (TensorBoard, MLflow). Needs ``gputop-doctor[lightning]``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.loggers import Logger, MLFlowLogger, TensorBoardLogger

from gputop_doctor.integrations.doctor import (
    DEFAULT_EVERY_N_STEPS,
    FINDINGS_TEXT,
    Doctor,
)
from gputop_doctor.integrations.node import DEFAULT_SERVE_URL


class DoctorCallback(pl.Callback):
    """See the module's docstring; the arguments are :class:`~gputop_doctor.integrations.
    doctor.Doctor`'s."""

    def __init__(
        self,
        every_n_steps: int = DEFAULT_EVERY_N_STEPS,
        *,
        serve_url: str | None = DEFAULT_SERVE_URL,
        gpus: Collection[int] | None = None,
        findings: bool = True,
    ) -> None:
        super().__init__()
        self.doctor = Doctor(every_n_steps, serve_url=serve_url, gpus=gpus, findings=findings)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.doctor.attach(trainer.train_dataloader, pl_module, leader=trainer.is_global_zero)
        self.doctor.pass_started()

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.doctor.pass_started()  # again after a validation inside the epoch: a no-op else
        self.doctor.step_started()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self.doctor.step_ended(lambda doctor: _log(trainer.loggers, doctor, trainer.global_step))

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.doctor.pass_ended()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.doctor.pass_ended()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit":
            self.doctor.close()


def _log(loggers: list[Logger], doctor: Doctor, step: int) -> None:
    metrics = doctor.metrics()
    text = doctor.findings_text()
    for logger in loggers:
        if metrics:
            logger.log_metrics(metrics, step=step)
        if text is not None:
            _log_text(logger, text, step)


def _log_text(logger: Logger, text: str, step: int) -> None:
    """Text where the logger has a place for it; the others get the scalars only."""
    if isinstance(logger, TensorBoardLogger):
        logger.experiment.add_text(FINDINGS_TEXT, _markdown_code(text), global_step=step)
    elif isinstance(logger, MLFlowLogger) and logger.run_id is not None:
        logger.experiment.log_text(logger.run_id, text, f"doctor/findings-step-{step}.txt")


def _markdown_code(text: str) -> str:
    """TensorBoard renders text as Markdown: each line indented as code, so a title quoting a
    process name or a path shows as written and never as a link or markup (a finding's line
    holds no newline to break out with)."""
    return "\n".join("    " + line for line in text.splitlines())
