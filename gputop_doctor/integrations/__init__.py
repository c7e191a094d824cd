"""Where people who don't write their own loop look: Lightning, Hugging Face, Accelerate.

- :mod:`gputop_doctor.integrations.lightning`: ``DoctorCallback``, a Lightning ``Callback``
  (``pip install 'gputop-doctor[lightning]'``);
- :mod:`gputop_doctor.integrations.hf`: ``DoctorCallback``, a ``transformers.TrainerCallback``
  (``pip install 'gputop-doctor[hf]'``);
- :class:`gputop_doctor.integrations.doctor.Doctor`: the same for a hand-written loop
  (Accelerate), logged with ``accelerator.log``.

Each times the trainer's own steps with the probe (a running ``gputop-doctor`` sees the job's
steps/s and data wait) and logs ``doctor/steps_per_s``, ``doctor/data_wait_pct`` and the node's
active findings every N steps. Importing this package imports no trainer library: each module
imports its own only when it is imported. See docs/integrations.md.
"""
