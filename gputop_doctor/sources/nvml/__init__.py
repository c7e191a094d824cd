"""The NVML reader: tolerant, one value or None per field, through pynvml."""
