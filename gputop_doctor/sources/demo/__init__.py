"""A simulated multi-GPU machine running a scripted training job."""
