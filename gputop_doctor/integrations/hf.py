"""``DoctorCallback`` for the Hugging Face ``Trainer``: the probe and the node's findings, logged
through the trainer's own ``report_to`` integrations (TensorBoard, MLflow, W&B, ...).

::

    from gputop_doctor.integrations.hf import add_doctor
    trainer = Trainer(model=model, args=args, train_dataset=train)
    add_doctor(trainer, every_n_steps=50)
    trainer.train()

Nothing in the model or the loop changes. The steps are timed from the trainer's hooks: a step
starts (``on_step_begin``) once the trainer holds its batches and ends after the optimizer step
(``on_step_end``); the time from one step's end to the next one's start is the wait for data.
Every ``every_n_steps`` optimizer steps the callback calls ``trainer.log`` with
``doctor/steps_per_s``, ``doctor/data_wait_pct`` and the findings as scalars (see
:mod:`gputop_doctor.integrations.doctor`), so every integration in ``report_to`` writes them
as it writes the loss.

Why the callback holds the trainer: a callback's ``on_log`` runs after the ``report_to``
callbacks (the trainer adds those first), too late to add values to what they write; calling
``trainer.log`` reaches all of them in any order. Needs ``gputop-doctor[hf]``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from gputop_doctor.integrations.doctor import DEFAULT_EVERY_N_STEPS, Doctor
from gputop_doctor.integrations.node import DEFAULT_SERVE_URL


class DoctorCallback(TrainerCallback):
    """See the module's docstring; the keyword arguments are :class:`~gputop_doctor.
    integrations.doctor.Doctor`'s. Add it with :func:`add_doctor` (or ``trainer.add_callback``
    with the same trainer)."""

    def __init__(
        self,
        trainer: Trainer,
        every_n_steps: int = DEFAULT_EVERY_N_STEPS,
        *,
        serve_url: str | None = DEFAULT_SERVE_URL,
        gpus: Collection[int] | None = None,
        findings: bool = True,
    ) -> None:
        self.trainer = trainer
        self.doctor = Doctor(every_n_steps, serve_url=serve_url, gpus=gpus, findings=findings)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        leader = self.trainer.is_world_process_zero()
        self.doctor.attach(kwargs.get("train_dataloader"), kwargs.get("model"), leader=leader)

    def on_epoch_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.doctor.pass_started()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.doctor.step_started()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.doctor.step_ended(self._log)

    def _log(self, doctor: Doctor) -> None:
        metrics = doctor.metrics()
        if metrics and self.trainer.is_world_process_zero():
            self.trainer.log(metrics)

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.doctor.pass_ended()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.doctor.close()


def add_doctor(
    trainer: Trainer,
    every_n_steps: int = DEFAULT_EVERY_N_STEPS,
    *,
    serve_url: str | None = DEFAULT_SERVE_URL,
    gpus: Collection[int] | None = None,
    findings: bool = True,
) -> DoctorCallback:
    """Add a :class:`DoctorCallback` to ``trainer`` and return it."""
    callback = DoctorCallback(
        trainer, every_n_steps, serve_url=serve_url, gpus=gpus, findings=findings
    )
    trainer.add_callback(callback)
    return callback
