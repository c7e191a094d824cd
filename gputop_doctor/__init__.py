"""gputop-doctor: a live GPU/CPU monitor for training jobs that says why training is slow."""

__version__ = "0.1.0"
