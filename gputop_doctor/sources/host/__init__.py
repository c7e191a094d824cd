"""The host and its processes, read from /proc (psutil only where /proc is not enough)."""
